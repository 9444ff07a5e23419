"""CEL for OpenFGA conditions: :mod:`.cel_parse`'s tree compiled and evaluated here.

Why not a CEL library: cel-python brings eight distributions (pendulum, PyYAML, jmespath,
...), the Rust and C++ bindings on PyPI bring a CLI's dependencies or 50 MB, and what an
OpenFGA condition needs is small (bench/RESULTS.md, "bastion-core's dependencies"). The
parse tree is compiled once into nested closures, so an evaluation is a few Python calls
per node. Operators are in :mod:`.cel_operators`, functions and methods in
:mod:`.cel_functions`, values in :mod:`.cel_values`.

Semantics are cel-go's where a condition can see them:

- errors are values: ``&&`` / ``||`` (and ``all`` / ``exists``) absorb an error when the
  other operand decides the result, and raise it otherwise;
- ``int`` and ``uint`` overflow, division and modulus by zero are errors; integer division
  truncates toward zero (Go's);
- no arithmetic across numeric types; ``==`` is false across types, except between
  numbers, which compare by value; ``<`` on two different non-numeric types is an error;
- a missing map key is an error; ``has(m.f)`` tests for it;
- ``matches`` is RE2 (google-re2: linear time, whatever pattern a request sends);
- every evaluation is charged as cel-go charges it (:mod:`.cel_cost`) and ends once past
  its budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bastion.core.fga.cel_cost import BUDGET, Budget, call_cost, spend
from bastion.core.fga.cel_functions import FUNCTIONS, METHODS
from bastion.core.fga.cel_operators import (
    OPERATORS,
    index,
    logical_not,
    negate,
    no_overload,
    select,
)
from bastion.core.fga.cel_parse import CelParseError, Node, Token, Tree, parse
from bastion.core.fga.cel_values import CelEvalError
from bastion.core.fga.errors import ConditionError

__all__ = ["CelParseError", "Program", "parse"]

Activation = Mapping[str, Any]
Eval = Callable[[Activation], Any]
#: cel-go's costs of a list or map literal (see :mod:`.cel_cost`).
_LIST_COST = 10
_MAP_COST = 30
#: cel-go expands a comprehension to a fold over an accumulator: ``all`` checks it and
#: ANDs each element (3), ``exists`` negates and ORs (4), ``exists_one`` adds 1 per match
#: (1, 2 on a match), ``map`` and ``filter`` append a one-element list (12, 1 when
#: skipped); reading the accumulator at the end costs 1 (2 for ``exists_one``'s ``== 1``).
_ALL_STEP = 3
_EXISTS_STEP = 4
_RESULT = 1
_SKIP_STEP = 1
_KEEP_STEP = 12


class Program:
    """A parsed expression compiled to closures; :meth:`evaluate` is pure."""

    def __init__(self, tree: Tree) -> None:
        self._run = _compile(tree)

    def evaluate(self, activation: Activation, budget: Budget | None = None) -> Any:
        """The expression's value; ``budget`` bounds the work (none: unbounded)."""
        return self.run({**activation, BUDGET: Budget() if budget is None else budget})

    def run(self, scope: Activation) -> Any:
        """:meth:`evaluate` on an activation that holds its budget under ``BUDGET``."""
        try:
            return self._run(scope)
        except ConditionError:
            raise
        except RecursionError as exc:
            raise CelEvalError("expression too deep") from exc
        except (ArithmeticError, ValueError, TypeError) as exc:  # e.g. a date past year 9999
            raise CelEvalError(f"evaluation failed: {exc}") from exc


# -- compiling ---------------------------------------------------------------------------------


def _compile(node: Node) -> Eval:
    if isinstance(node, Token):
        raise CelEvalError(f"unexpected token {node!r}")
    compiler = _COMPILERS.get(node.data)
    if compiler is not None:
        return compiler(node.children)
    if len(node.children) == 1:
        return _compile(node.children[0])
    raise CelEvalError(f"unsupported expression ({node.data})")


def _ternary(children: Sequence[Node]) -> Eval:
    if len(children) == 1:
        return _compile(children[0])
    condition, then, otherwise = (_compile(child) for child in children)

    def run(activation: Activation) -> Any:
        chosen = condition(activation)
        if not isinstance(chosen, bool):
            raise no_overload("_?_:_", chosen)
        return then(activation) if chosen else otherwise(activation)

    return run


def _logical(decides: bool) -> Callable[[Sequence[Node]], Eval]:
    """``||`` (``decides=True``: a true operand decides) or ``&&`` (a false one does)."""
    operator = "_||_" if decides else "_&&_"

    def build(children: Sequence[Node]) -> Eval:
        if len(children) == 1:
            return _compile(children[0])
        left, right = _compile(children[0]), _compile(children[1])

        def run(activation: Activation) -> Any:
            error: CelEvalError | None = None
            for operand in (left, right):
                try:
                    value = operand(activation)
                except CelEvalError as exc:
                    error = error or exc
                    continue
                if not isinstance(value, bool):
                    error = error or no_overload(operator, value)
                elif value is decides:
                    return decides
            if error is not None:
                raise error
            return not decides

        return run

    return build


def _binary(children: Sequence[Node]) -> Eval:
    """``relation``, ``addition``, ``multiplication``: ``[operator(left)] right``."""
    if len(children) == 1:
        return _compile(children[0])
    operator, right_node = children
    assert isinstance(operator, Tree)
    function, cost = OPERATORS[operator.data], call_cost(operator.data)
    (left, left_cost), (right, right_cost) = _operand(operator.children[0]), _operand(right_node)
    fixed = left_cost + right_cost

    def run(activation: Activation) -> Any:
        a, b = left(activation), right(activation)
        spend(activation, fixed + (1 if cost is None else cost(a, b)))
        return function(a, b)

    return run


def _unary(children: Sequence[Node]) -> Eval:
    if len(children) == 1:
        return _compile(children[0])
    operator, operand_node = children
    assert isinstance(operator, Tree)
    operand = _compile(operand_node)
    function = logical_not if operator.data == "unary_not" else negate

    def run(activation: Activation) -> Any:
        value = operand(activation)
        spend(activation, 1)
        return function(value)

    return run


def _member_dot(children: Sequence[Node]) -> Eval:
    (target, fixed), field = _operand(children[0]), str(children[1])

    def run(activation: Activation) -> Any:
        container = target(activation)
        spend(activation, fixed + 1)
        return select(container, field)

    return run


def _member_index(children: Sequence[Node]) -> Eval:
    (target, target_cost), (key, key_cost) = _operand(children[0]), _operand(children[1])
    fixed = target_cost + key_cost + 1

    def run(activation: Activation) -> Any:
        container, value = target(activation), key(activation)
        spend(activation, fixed)
        return index(container, value)

    return run


def _arguments(rest: Sequence[Node]) -> list[Node]:
    return list(rest[0].children) if rest and isinstance(rest[0], Tree) else []


def _member_dot_arg(children: Sequence[Node]) -> Eval:
    target_node, method, *rest = children
    name, argument_nodes = str(method), _arguments(rest)
    target = _compile(target_node)
    variable = _identifier(argument_nodes[0]) if argument_nodes else None
    if name in _MACROS and variable is not None and len(argument_nodes) in (2, 3):
        steps = [_compile(node) for node in argument_nodes[1:]]
        return _MACROS[name](target, variable, steps)
    function, cost = METHODS.get(name), call_cost(name)
    receiver_eval, fixed = _operand(target_node)
    arguments = []
    for node in argument_nodes:
        argument, argument_cost = _operand(node)
        arguments.append(argument)
        fixed += argument_cost

    def run(activation: Activation) -> Any:
        receiver = receiver_eval(activation)
        values = [argument(activation) for argument in arguments]
        if function is None:
            raise no_overload(name, receiver, *values)
        spend(activation, fixed + (1 if cost is None else cost(receiver, *values)))
        return function(receiver, *values)

    return run


def _ident_arg(children: Sequence[Node]) -> Eval:
    name, argument_nodes = str(children[0]), _arguments(children[1:])
    if name == "has" and len(argument_nodes) == 1:
        return _has(argument_nodes[0])
    function, cost = FUNCTIONS.get(name), call_cost(name)
    arguments, fixed = [], 0
    for node in argument_nodes:
        argument, argument_cost = _operand(node)
        arguments.append(argument)
        fixed += argument_cost

    def run(activation: Activation) -> Any:
        values = [argument(activation) for argument in arguments]
        if function is None:
            raise CelEvalError(f"undeclared reference to '{name}'")
        spend(activation, fixed + (1 if cost is None else cost(*values)))
        return function(*values)

    return run


def _has(node: Node) -> Eval:
    select = _find(node, "member_dot")
    if select is None:
        raise CelParseError("has() needs a field selection, as in has(m.f)")
    target, field = _compile(select.children[0]), str(select.children[1])

    def run(activation: Activation) -> bool:
        container = target(activation)
        spend(activation, 1)
        if not isinstance(container, dict):
            raise no_overload("has", container)
        return field in container

    return run


def _ident(children: Sequence[Node]) -> Eval:
    lookup = _lookup(str(children[0]))

    def run(activation: Activation) -> Any:
        spend(activation, 1)
        return lookup(activation)

    return run


def _lookup(name: str) -> Eval:
    """A variable's value, not charged (its caller charges it)."""

    def run(activation: Activation) -> Any:
        try:
            return activation[name]
        except KeyError:
            raise CelEvalError(f"undeclared reference to '{name}'") from None

    return run


#: Trees that compile to their only child's closure when they have one.
_WRAPPERS = frozenset(
    ("expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary")
)


def _operand(node: Node) -> tuple[Eval, int]:
    """An operator's or call's operand compiled, and the cost its caller adds to its own
    charge for it: a variable's 1, so that ``a < b + c`` is charged twice, not five times."""
    found = node
    while isinstance(found, Tree) and len(found.children) == 1:
        if found.data == "ident":
            return _lookup(str(found.children[0])), 1
        if found.data in _COMPILERS and found.data not in _WRAPPERS:
            break
        found = found.children[0]
    return _compile(node), 0


def _literal(children: Sequence[Node]) -> Eval:
    token = children[0]
    assert isinstance(token, Token)
    value = token.literal  # decoded by the parser
    return lambda _activation: value


def _list_lit(children: Sequence[Node]) -> Eval:
    items = [_compile(node) for node in _arguments(children)]

    def run(activation: Activation) -> list[Any]:
        values = [item(activation) for item in items]
        spend(activation, _LIST_COST)
        return values

    return run


def _map_lit(children: Sequence[Node]) -> Eval:
    entries = [_compile(node) for node in _arguments(children)]
    pairs = list(zip(entries[::2], entries[1::2], strict=True))

    def run(activation: Activation) -> dict[Any, Any]:
        spend(activation, _MAP_COST)
        result = {}
        for key, value in pairs:
            k = key(activation)
            if not isinstance(k, str | int) or k in result:
                raise CelEvalError(f"invalid or repeated map key {k!r}")
            result[k] = value(activation)
        return result

    return run


def _unsupported(children: Sequence[Node]) -> Eval:
    def run(_activation: Activation) -> Any:
        raise CelEvalError("message construction is not supported")

    return run


def _find(node: Node, data: str) -> Tree | None:
    """``node`` itself if it is a ``data`` tree, looking through single-child wrappers."""
    while isinstance(node, Tree):
        if node.data == data:
            return node
        if len(node.children) != 1:
            return None
        node = node.children[0]
    return None


def _identifier(node: Node) -> str | None:
    found = _find(node, "ident")
    return None if found is None else str(found.children[0])


# -- macros -----------------------------------------------------------------------------------

Macro = Callable[[Eval, str, list[Eval]], Eval]


def _items(container: Any) -> list[Any]:
    if isinstance(container, list):
        return container
    if isinstance(container, dict):
        return list(container)
    raise no_overload("comprehension", container)


def _quantifier(decides: bool) -> Macro:
    """``exists`` (a true predicate decides) or ``all`` (a false one does), absorbing
    errors as ``||`` / ``&&`` do."""

    def build(target: Eval, variable: str, steps: list[Eval]) -> Eval:
        if len(steps) != 1:
            raise CelParseError("all() and exists() take a variable and a predicate")
        [predicate] = steps
        step = _EXISTS_STEP if decides else _ALL_STEP

        def run(activation: Activation) -> bool:
            error: CelEvalError | None = None
            items = _items(target(activation))
            spend(activation, _RESULT)
            for item in items:
                spend(activation, step)
                try:
                    value = predicate({**activation, variable: item})
                except CelEvalError as exc:
                    error = error or exc
                    continue
                if not isinstance(value, bool):
                    error = error or no_overload("predicate", value)
                elif value is decides:
                    return decides
            if error is not None:
                raise error
            return not decides

        return run

    return build


def _exists_one(target: Eval, variable: str, steps: list[Eval]) -> Eval:
    [predicate] = steps

    def run(activation: Activation) -> bool:
        found = 0
        items = _items(target(activation))
        spend(activation, 2 * _RESULT)
        for item in items:
            value = predicate({**activation, variable: item})
            if not isinstance(value, bool):
                raise no_overload("predicate", value)
            spend(activation, _SKIP_STEP + value)
            found += value
        return found == 1

    return run


def _map(target: Eval, variable: str, steps: list[Eval]) -> Eval:
    *keep, transform = steps

    def run(activation: Activation) -> list[Any]:
        result = []
        items = _items(target(activation))
        spend(activation, _RESULT)
        for item in items:
            scope = {**activation, variable: item}
            if keep and _predicate(keep[0], scope) is False:
                spend(activation, _SKIP_STEP)
                continue
            spend(activation, _KEEP_STEP)
            result.append(transform(scope))
        return result

    return run


def _filter(target: Eval, variable: str, steps: list[Eval]) -> Eval:
    if len(steps) != 1:
        raise CelParseError("filter() takes a variable and a predicate")
    [predicate] = steps

    def run(activation: Activation) -> list[Any]:
        kept = []
        items = _items(target(activation))
        spend(activation, _RESULT)
        for item in items:
            spend(activation, _SKIP_STEP)
            if _predicate(predicate, {**activation, variable: item}):
                spend(activation, _KEEP_STEP)
                kept.append(item)
        return kept

    return run


def _predicate(predicate: Eval, scope: Activation) -> bool:
    value = predicate(scope)
    if not isinstance(value, bool):
        raise no_overload("predicate", value)
    return value


_MACROS: dict[str, Macro] = {
    "all": _quantifier(False),
    "exists": _quantifier(True),
    "exists_one": _exists_one,
    "map": _map,
    "filter": _filter,
}


_COMPILERS: dict[str, Callable[[Sequence[Node]], Eval]] = {
    "expr": _ternary,
    "conditionalor": _logical(True),
    "conditionaland": _logical(False),
    "relation": _binary,
    "addition": _binary,
    "multiplication": _binary,
    "unary": _unary,
    "member_dot": _member_dot,
    "member_dot_arg": _member_dot_arg,
    "member_index": _member_index,
    "member_object": _unsupported,
    "ident_arg": _ident_arg,
    "dot_ident_arg": _ident_arg,
    "ident": _ident,
    "dot_ident": _ident,
    "literal": _literal,
    "list_lit": _list_lit,
    "map_lit": _map_lit,
}
