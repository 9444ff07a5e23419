"""core as a library: its public API is complete, light to import, documented, and its
reference driver and examples work.

* ``core.state_machines.__all__`` exports every machine, event and effect defined under it.
* Importing the flows and the FGA engine loads no I/O, framework or optional library.
* ``docs/embedding.md``'s tables name exactly the machines, events and effects exported, and
  each machine's row lists exactly its table's events and its ``EMITS``.
* The reference driver handles every effect a machine of ``MACHINES`` may emit.
* Every example runs in a fresh interpreter and exits 0 with its checks printed.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

import bastion.core.state_machines as flows
from bastion.core.errors import BastionError
from bastion.core.reference import HANDLED
from bastion.core.state_machines import MACHINES, Effect, Event, Fail, Handoff, Machine, Respond

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "embedding.md"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
#: never loaded by importing the flows or the FGA engine (the issue's list, plus the
#: optional libraries behind extras and the server's settings model)
HEAVY = (
    "trio", "anyio", "asyncio", "socket", "ssl", "sqlalchemy", "grpc", "starlette", "quart",
    "hypercorn", "argon2", "joserfc", "segno", "bastion.core.settings",
)  # fmt: skip


def _defined(kind: type) -> set[type]:
    found: set[type] = set()
    for info in pkgutil.iter_modules(flows.__path__):
        module = importlib.import_module(f"bastion.core.state_machines.{info.name}")
        found.update(
            obj
            for obj in vars(module).values()
            if inspect.isclass(obj)
            and obj.__module__ == module.__name__
            and issubclass(obj, kind)
            and not _partial(obj)
        )
    return found


def _partial(obj: type) -> bool:
    """A partial machine (no table of its own): a share of a machine that is exported."""
    return issubclass(obj, Machine) and obj is not Machine and not hasattr(obj, "TABLE")


def _exported(kind: type) -> set[type]:
    objects = [getattr(flows, name) for name in flows.__all__]
    return {o for o in objects if inspect.isclass(o) and issubclass(o, kind)}


@pytest.mark.parametrize("kind", [Machine, Event, Effect])
def test_every_machine_event_and_effect_is_exported(kind: type) -> None:
    assert _defined(kind) == _exported(kind)


def test_every_flow_machine_is_listed_and_declares_what_it_emits() -> None:
    assert flows.MfaMachine in MACHINES.values()
    assert {m for m in _exported(Machine) if m is not Machine} - set(MACHINES.values()) == {
        flows.OAuthAuthorizeMachine,  # built with an OAuthPolicy too
        flows.PasskeyMachine,  # verifying needs a WebAuthn relying party
        flows.PasskeyOptionsMachine,
    }
    for machine in _exported(Machine) - {Machine}:
        assert machine.EMITS, machine
        assert all(issubclass(e, Effect) for e in machine.EMITS)


def test_the_reference_driver_handles_every_effect_the_flows_emit() -> None:
    for machine in MACHINES.values():
        outcomes = {e for e in machine.EMITS if issubclass(e, Fail | Respond | Handoff)}
        assert machine.EMITS - outcomes <= HANDLED, machine.FLOW


def test_importing_the_flows_and_the_engine_loads_nothing_heavy() -> None:
    code = (
        "import sys, bastion.core.state_machines, bastion.core.fga, bastion.core.reference\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted(m for m in sys.modules if m in heavy or m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


# -- the guide --------------------------------------------------------------------------------


def _section(title: str) -> str:
    text = GUIDE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _first_column(section: str) -> set[str]:
    return set(re.findall(r"^\| `(\w+)` \|", section, flags=re.M))


def _names(cell: str) -> set[str]:
    return set(re.findall(r"`(\w+)`", cell))


def _machine_rows() -> dict[str, dict[str, set[str]]]:
    rows: dict[str, dict[str, set[str]]] = {}
    for block in _section("Machines").split("\n### ")[1:]:
        name = re.match(r"`(\w+)`", block)
        assert name is not None
        cells = dict(re.findall(r"^\| ([a-z ]+) \| (.*) \|$", block, flags=re.M))
        rows[name.group(1)] = {key: _names(value) for key, value in cells.items()}
    return rows


def test_the_guide_names_every_exported_effect_and_event() -> None:
    assert _first_column(_section("Effects")) == {e.__name__ for e in _exported(Effect)} - {
        "Effect"
    }
    assert _first_column(_section("Events")) == {e.__name__ for e in _exported(Event)} - {"Event"}


def test_the_guide_tables_each_machine_as_it_is() -> None:
    rows = _machine_rows()
    machines: set[Any] = _exported(Machine) - {Machine}
    assert set(rows) == {m.__name__ for m in machines}
    for machine in machines:
        starts = {e.__name__ for s, e in machine.TABLE if s.name == "START"}
        answers = {e.__name__ for s, e in machine.TABLE if s.name != "START"} - starts
        row = rows[machine.__name__]
        assert row["starts with"] == starts, machine.__name__
        assert row["answers it takes"] == answers, machine.__name__
        assert row["effects it may emit"] == {e.__name__ for e in machine.EMITS}
        assert row["error codes it may raise"] == _error_codes(machine), machine.__name__


def _error_codes(machine: type) -> set[str]:
    """The ``code`` of every concrete ``BastionError`` its modules name (what it may
    ``Fail`` with): the machine's, and those of the partial machines it inherits."""
    parts = [c for c in machine.__mro__ if issubclass(c, Machine) and c is not Machine]
    modules = {sys.modules[part.__module__] for part in parts}
    found = (
        getattr(module, n.id, None)
        for module in modules
        for n in ast.walk(ast.parse(inspect.getsource(module)))
        if isinstance(n, ast.Name)
    )
    return {
        error.code
        for error in found
        if inspect.isclass(error) and issubclass(error, BastionError) and not error._abstract
    }


def test_the_public_names_an_embedder_touches_are_exported() -> None:
    from bastion.core.auth.emails import EmailEvent
    from bastion.core.auth.responses import IssuedTokens
    from bastion.core.auth.user import User
    from bastion.core.fga import ConditionError
    from bastion.core.fga.errors import ConditionError as Defined
    from bastion.core.state_machines.effects import AuditAction, Result
    from bastion.core.state_machines.mfa_effects import MfaOutcome

    assert ConditionError is Defined
    public = {n: getattr(flows, n) for n in flows.__all__}
    for value in (EmailEvent, IssuedTokens, User, AuditAction, Result, MfaOutcome):
        assert value in public.values()


def test_any_effect_is_every_concrete_effect() -> None:
    concrete = _defined(Effect) - {Effect, Handoff}
    assert set(get_args(flows.AnyEffect)) == concrete


# -- examples ---------------------------------------------------------------------------------


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} >= {
        "sync_sqlite_login.py",
        "asyncio_login_email_code.py",
        "fga_alone.py",
    }


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_and_checks_its_outcome(example: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    assert all(line.startswith("ok ") for line in lines), done.stdout
