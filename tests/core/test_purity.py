"""``core`` stays pure: no module under it imports an I/O, network or framework library.

The check reads every module's syntax tree (so an import inside a function, or under
``if TYPE_CHECKING``, counts too) rather than importing anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bastion import core

CORE = Path(core.__file__).parent
FORBIDDEN = frozenset(
    {
        "trio", "trio_asyncio", "quart", "quart_trio", "hypercorn", "graphql", "grpc",
        "sqlalchemy", "alembic", "asyncpg", "pymysql", "psycopg", "psycopg2", "redis",
        "asyncio", "anyio", "socket", "ssl", "httpx", "requests", "urllib3", "smtplib",
        "aiosmtpd", "subprocess", "threading",
    }
)  # fmt: skip


def forbidden_imports(source: str) -> list[str]:
    """Top-level names of forbidden modules that ``source`` imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.extend(name for name in names if name.split(".")[0] in FORBIDDEN)
    return found


MODULES = sorted(CORE.rglob("*.py"))


def test_core_has_modules_to_check() -> None:
    names = {p.relative_to(CORE).as_posix() for p in MODULES}
    assert {"state_machines/login.py", "auth/claims.py", "errors.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(CORE).as_posix())
def test_module_imports_nothing_impure(path: Path) -> None:
    assert forbidden_imports(path.read_text()) == []


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import trio", ["trio"]),
        ("import sqlalchemy.ext.asyncio as sa", ["sqlalchemy.ext.asyncio"]),
        ("from redis.asyncio import Redis", ["redis.asyncio"]),
        ("def f():\n    import socket\n", ["socket"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import httpx\n", ["httpx"]),
        ("import json, asyncio", ["asyncio"]),
        ("from . import trio", []),
        ("import triolet\nfrom core.errors import Internal", []),
    ],
)
def test_the_checker_sees_every_import_form(source: str, found: list[str]) -> None:
    assert forbidden_imports(source) == found
