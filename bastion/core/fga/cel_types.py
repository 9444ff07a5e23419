"""The part of CEL's type check OpenFGA's server applies when it accepts a model.

OpenFGA compiles each condition with its parameters declared as typed CEL variables and
refuses the model (2056) when the expression names an undeclared variable, applies an
operator to operands it has no overload for, or does not give a ``bool``. The evaluator does
not type-check, so this walks the parse tree and infers types where they are certain; anything
else (a map field, a comprehension variable, a list literal, a function it does not know)
is ``dyn`` and never refused. Messages are cel-go's, without the source position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bastion.core.fga.cel_parse import Node, Token, Tree
from bastion.core.fga.model import ConditionParam

__all__ = ["CelTypeError", "check_types"]

TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
_SCALARS = {
    "TYPE_NAME_BOOL": "bool",
    "TYPE_NAME_STRING": "string",
    "TYPE_NAME_INT": "int",
    "TYPE_NAME_UINT": "uint",
    "TYPE_NAME_DOUBLE": "double",
    "TYPE_NAME_DURATION": DURATION,
    "TYPE_NAME_TIMESTAMP": TIMESTAMP,
    "TYPE_NAME_IPADDRESS": "ipaddress",
}
_COMPARISONS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
}
_ARITHMETIC = {
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}
#: the operand types each arithmetic operator takes twice (and gives back)
_SAME_TYPE_ARITHMETIC = {
    "_+_": ("int", "uint", "double", "string", "bytes", DURATION),
    "_-_": ("int", "uint", "double", DURATION),
    "_*_": ("int", "uint", "double"),
    "_/_": ("int", "uint", "double"),
    "_%_": ("int", "uint"),
}
#: ``(operator, left, right) -> result`` where the operands' types differ
_MIXED_ARITHMETIC = {
    ("_+_", TIMESTAMP, DURATION): TIMESTAMP,
    ("_+_", DURATION, TIMESTAMP): TIMESTAMP,
    ("_-_", TIMESTAMP, DURATION): TIMESTAMP,
}
_STRING_METHODS = ("startsWith", "endsWith", "contains", "matches")
_MACROS = ("exists", "all", "exists_one", "map", "filter")
_FUNCTIONS = {
    "timestamp": TIMESTAMP,
    "duration": DURATION,
    "ipaddress": "ipaddress",
    "int": "int",
    "uint": "uint",
    "double": "double",
    "string": "string",
    "bool": "bool",
    "size": "int",
}

#: a CEL type name, or ``None`` for dyn (not known here)
Type = str | None
_LITERALS: dict[str, Type] = {
    "BOOL_LIT": "bool",
    "NULL_LIT": None,
    "STRING_LIT": "string",
    "BYTES_LIT": "bytes",
    "UINT_LIT": "uint",
    "FLOAT_LIT": "double",
    "INT_LIT": "int",
}


class CelTypeError(ValueError):
    """An expression OpenFGA's CEL environment refuses."""


def param_type(param: ConditionParam) -> str:
    """The CEL type OpenFGA declares for a condition parameter."""
    element = _SCALARS.get(param.generic[0], "dyn") if param.generic else "dyn"
    if param.type_name == "TYPE_NAME_LIST":
        return f"list({element})"
    if param.type_name == "TYPE_NAME_MAP":
        return f"map(string, {element})"
    return _SCALARS.get(param.type_name, "dyn")


def check_types(tree: Tree, params: Mapping[str, ConditionParam]) -> None:
    """Raise :class:`CelTypeError` where OpenFGA's compile of the expression would fail."""
    result = _Inference({name: param_type(p) for name, p in params.items()}).infer(tree)
    if result is not None and result != "bool":
        raise CelTypeError(f"expected a bool condition expression output, but got '{result}'")


def _no_overload(operator: str, *operands: str) -> CelTypeError:
    return CelTypeError(
        f"found no matching overload for '{operator}' applied to '({', '.join(operands)})'"
    )


def _element(container: str) -> Type:
    """The element type of ``list(T)`` / the value type of ``map(K, V)``."""
    if container.startswith("list("):
        inner = container[5:-1]
    elif container.startswith("map("):
        inner = container[4:-1].partition(", ")[2]
    else:
        return None
    return None if inner == "dyn" else inner


class _Inference:
    def __init__(self, variables: Mapping[str, str]) -> None:
        self.variables = dict(variables)
        #: comprehension variables in scope (dyn)
        self.bound: list[str] = []

    def infer(self, node: Node) -> Type:
        if isinstance(node, Token):
            return None
        handler = getattr(self, f"_{node.data}", None)
        if handler is not None:
            found: Type = handler(node.children)
            return None if found == "dyn" else found
        if len(node.children) == 1:
            return self.infer(node.children[0])
        for child in node.children:
            self.infer(child)
        return None

    # -- operators -------------------------------------------------------------------------

    def _expr(self, children: Sequence[Node]) -> Type:
        if len(children) == 1:
            return self.infer(children[0])
        self._logical(children[0])
        then, otherwise = self.infer(children[1]), self.infer(children[2])
        return then if then == otherwise else None

    def _logical(self, node: Node) -> None:
        found = self.infer(node)
        if found is not None and found != "bool":
            raise CelTypeError(f"expected type 'bool' but found '{found}'")

    def _conditionalor(self, children: Sequence[Node]) -> Type:
        if len(children) == 1:
            return self.infer(children[0])
        for child in children:
            self._logical(child)
        return "bool"

    _conditionaland = _conditionalor

    def _relation(self, children: Sequence[Node]) -> Type:
        if len(children) == 1:
            return self.infer(children[0])
        operator, right_node = children
        assert isinstance(operator, Tree)
        left, right = self.infer(operator.children[0]), self.infer(right_node)
        if operator.data == "relation_in":
            if left is not None and right is not None:
                if right.startswith("list("):
                    element = _element(right)
                elif right.startswith("map("):
                    element = "string"
                else:
                    raise _no_overload("@in", left, right)
                if element is not None and element != left:
                    raise _no_overload("@in", left, right)
            return "bool"
        if left is not None and right is not None and left != right:
            raise _no_overload(_COMPARISONS[operator.data], left, right)
        return "bool"

    def _arithmetic(self, children: Sequence[Node]) -> Type:
        if len(children) == 1:
            return self.infer(children[0])
        operator, right_node = children
        assert isinstance(operator, Tree)
        name = _ARITHMETIC.get(operator.data)
        left, right = self.infer(operator.children[0]), self.infer(right_node)
        if name is None or left is None or right is None:
            return None
        if left == right:
            if name == "_-_" and left == TIMESTAMP:
                return DURATION
            if left in _SAME_TYPE_ARITHMETIC[name] or (name == "_+_" and left.startswith("list(")):
                return left
            raise _no_overload(name, left, right)
        mixed = _MIXED_ARITHMETIC.get((name, left, right))
        if mixed is None:
            raise _no_overload(name, left, right)
        return mixed

    _addition = _arithmetic
    _multiplication = _arithmetic

    def _unary(self, children: Sequence[Node]) -> Type:
        if len(children) == 1:
            return self.infer(children[0])
        operator, operand = children
        assert isinstance(operator, Tree)
        found = self.infer(operand)
        if operator.data == "unary_not":
            if found is not None and found != "bool":
                raise _no_overload("!_", found)
            return "bool"
        if found is not None and found not in ("int", "double", DURATION):
            raise _no_overload("-_", found)
        return found

    # -- members and primaries ----------------------------------------------------------------

    def _member_dot(self, children: Sequence[Node]) -> Type:
        container = self.infer(children[0])
        return None if container is None else _element(container)

    def _member_index(self, children: Sequence[Node]) -> Type:
        container = self.infer(children[0])
        self.infer(children[1])
        return None if container is None else _element(container)

    def _member_dot_arg(self, children: Sequence[Node]) -> Type:
        target, method, *rest = children
        name = str(method)
        arguments = list(rest[0].children) if rest and isinstance(rest[0], Tree) else []
        receiver = self.infer(target)
        if name in _MACROS and arguments and _identifier(arguments[0]) is not None:
            self.bound.append(str(_identifier(arguments[0])))
            try:
                for argument in arguments[1:]:
                    self.infer(argument)
            finally:
                self.bound.pop()
            return "bool" if name in ("exists", "all", "exists_one") else None
        types = [self.infer(argument) for argument in arguments]
        if name in _STRING_METHODS and receiver == "string":
            if types and types[0] is not None and types[0] != "string":
                raise CelTypeError(
                    f"found no matching overload for '{name}' applied to 'string.({types[0]})'"
                )
            return "bool"
        if name == "in_cidr":
            return "bool"
        if name == "size":
            return "int"
        return None

    def _ident(self, children: Sequence[Node]) -> Type:
        name = str(children[0])
        if name in self.bound:
            return None
        if name not in self.variables:
            raise CelTypeError(f"undeclared reference to '{name}' (in container '')")
        return self.variables[name]

    def _ident_arg(self, children: Sequence[Node]) -> Type:
        name, *rest = children
        if rest and isinstance(rest[0], Tree):
            for argument in rest[0].children:
                self.infer(argument)
        return _FUNCTIONS.get(str(name))

    def _literal(self, children: Sequence[Node]) -> Type:
        token = children[0]
        assert isinstance(token, Token)
        return _LITERALS[token.type]

    def _list_lit(self, children: Sequence[Node]) -> Type:
        for child in children:
            self.infer(child)
        return None

    _map_lit = _list_lit


def _identifier(node: Node) -> str | None:
    """The name when ``node`` (an expression) is a bare identifier."""
    while isinstance(node, Tree):
        if node.data == "ident":
            return str(node.children[0])
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return None
