"""The house's import rules, read from the code's syntax trees (nothing is imported, so
an import inside a function or under ``if TYPE_CHECKING`` counts too):

- the layers run ``bastion.core`` <- ``.storage`` <- ``.service`` <- ``.transports`` <- the
  server entry (``bastion``'s other modules): a module imports only its own layer and those
  below it;
- a transport (``transports.rest``, ``.graphql``, ``.grpc``, ``.pages``) never imports
  another; what they share over HTTP lives in ``transports.http``, which imports none;
- nothing in ``service`` imports a wire framework;
- no import circle anywhere: the module graph has no strongly connected component of
  more than one module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: bastion's subpackages; every other module of ``bastion`` is the server entry.
SUBPACKAGES = ("core", "storage", "service", "transports", "conformance")
LAYER = {"core": 0, "storage": 1, "service": 2, "transports": 3, "entry": 4}
SHARED_TRANSPORT = "http"
WIRE_FRAMEWORKS = frozenset(
    {"quart", "quart_trio", "starlette", "werkzeug", "hypercorn", "h11", "httptools", "h2",
     "hyperframe", "graphql", "grpc", "grpc_health", "grpc_reflection", "grpc_tools"}
)  # fmt: skip


def area(module: str) -> str:
    """``core``, ``storage``, ``service``, ``transports``, ``conformance`` or ``entry``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SUBPACKAGES else "entry"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_modules() -> dict[str, Path]:
    """Every module of the project's packages, generated protobuf code left out."""
    found = {}
    for path in sorted((ROOT / "bastion").rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")) or "node_modules" in path.parts:
            continue
        found[module_name(path)] = path
    return found


def imported_names(path: Path, module: str) -> Iterator[str]:
    """Dotted names ``path`` imports; ``from a import b`` gives ``a.b`` (a module or a
    name in ``a``, resolved against the tree later). Relative imports are made absolute."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop] if drop else anchor
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield f"{base}.{alias.name}"


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The tree's module that ``name`` names (the longest prefix that is one)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> modules of the tree it imports, module -> outside top-level names)."""
    modules = source_modules()
    inside: dict[str, set[str]] = {}
    outside: dict[str, set[str]] = {}
    for module, path in modules.items():
        inside[module] = set()
        outside[module] = set()
        for name in imported_names(path, module):
            target = resolve(name, modules)
            if target is None:
                outside[module].add(name.split(".")[0])
            elif target != module and not module.startswith(target + "."):
                # A module importing its own package's __init__ is Python's doing, not a tie.
                inside[module].add(target)
    return inside, outside


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module only."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def transport_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if area(module) == "transports" and len(parts) > 2 else None


INSIDE, OUTSIDE = import_graph()


def test_the_graph_covers_every_layer() -> None:
    assert {area(m) for m in INSIDE} == {*SUBPACKAGES, "entry"}
    assert "bastion.service.auth.service" in INSIDE["bastion.transports.rest.auth"]


def test_no_import_circles() -> None:
    assert strongly_connected(INSIDE) == []


def test_imports_run_down_the_layers() -> None:
    upward = [
        f"{module} -> {target}"
        for module, targets in INSIDE.items()
        if area(module) in LAYER
        for target in targets
        if LAYER.get(area(target), -1) > LAYER[area(module)]
    ]
    assert upward == []


def test_no_transport_imports_another() -> None:
    crossing = [
        f"{module} -> {target}"
        for module, targets in INSIDE.items()
        if (own := transport_of(module)) is not None
        for target in targets
        if (other := transport_of(target)) is not None
        and other != own
        and (other != SHARED_TRANSPORT or own == SHARED_TRANSPORT)
    ]
    assert crossing == []


def test_the_service_layer_imports_no_wire_framework() -> None:
    wired = {
        module: sorted(names & WIRE_FRAMEWORKS)
        for module, names in OUTSIDE.items()
        if area(module) == "service" and names & WIRE_FRAMEWORKS
    }
    assert wired == {}


@pytest.mark.parametrize(
    ("graph", "circles"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_the_circle_finder(graph: dict[str, set[str]], circles: list[list[str]]) -> None:
    assert sorted(strongly_connected(graph)) == circles
