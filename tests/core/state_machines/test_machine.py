"""The shared machinery: table validation, outcome checks, state diagrams."""

from __future__ import annotations

import dataclasses
import enum
import pathlib
import re
import sys

import pytest

from bastion.core.auth.mfa import Method
from bastion.core.auth.responses import MessageResponse
from bastion.core.auth.user import User
from bastion.core.errors import InvalidArgument, Unauthenticated
from bastion.core.state_machines import MACHINES
from bastion.core.state_machines._machine import Event, LocalFlowError, Machine, Table, edge, to_dot
from bastion.core.state_machines.effects import Fail, LoadUser, Respond
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from tests.core.state_machines.harness import env
from tests.core.state_machines.harness import user as harness_user


class S(enum.Enum):
    START = "start"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Poke(Event):
    how: str


@dataclasses.dataclass(slots=True, kw_only=True)
class Ctx:
    user: User | None = None


TOY_TABLE: Table[S] = {(S.START, Poke): edge("_on_poke", S.WAITING, S.FAILED)}


def make(handler_result: object) -> Machine[S]:
    """A one-edge machine whose handler returns ``handler_result``."""

    class Toy(Machine[S]):
        FLOW = "toy"
        STATES = S
        TABLE = TOY_TABLE
        CONTEXT = Ctx
        EMITS = frozenset({Fail, LoadUser, StartChallenge})

        def _on_poke(self, event: Poke) -> object:
            return handler_result

    return Toy(env())


def test_a_handler_may_only_move_to_a_listed_target() -> None:
    machine = make(([], S.DONE))
    with pytest.raises(LocalFlowError, match="DONE is not a target"):
        machine.handle(Poke(how="x"))
    assert machine.state is S.ERROR


def test_a_fail_effect_must_land_in_failed_and_failed_needs_a_fail() -> None:
    fail = Fail(error=Unauthenticated, message="no")
    with pytest.raises(LocalFlowError, match="does not match the outcome"):
        make(([fail], S.WAITING)).handle(Poke(how="x"))
    with pytest.raises(LocalFlowError, match="does not match the outcome"):
        make(([LoadUser(user_id="u")], S.FAILED)).handle(Poke(how="x"))


def test_only_the_last_effect_may_await_a_reply() -> None:
    machine = make(([LoadUser(user_id="a"), LoadUser(user_id="b")], S.WAITING))
    with pytest.raises(LocalFlowError, match="only the last effect"):
        machine.handle(Poke(how="x"))


def test_an_effect_outside_emits_is_refused() -> None:
    machine = make(([Respond(result=MessageResponse(message="hi"))], S.WAITING))
    with pytest.raises(LocalFlowError, match=r"emitted \['Respond'\], not in its EMITS"):
        machine.handle(Poke(how="x"))
    assert machine.state is S.ERROR


def test_a_handoff_comes_last() -> None:
    request = ChallengeRequested(user=harness_user(), method=Method.EMAIL_OTP)
    machine = make(([StartChallenge(request=request), LoadUser(user_id="b")], S.WAITING))
    with pytest.raises(LocalFlowError, match="only the last effect"):
        machine.handle(Poke(how="x"))


def test_tables_naming_missing_handlers_or_foreign_states_are_refused() -> None:
    with pytest.raises(TypeError, match="no handler"):

        class Broken(Machine[S]):
            FLOW = "broken"
            STATES = S
            TABLE = {(S.START, Poke): edge("_missing", S.DONE)}  # noqa: RUF012
            CONTEXT = Ctx
            EMITS = frozenset()

    class Other(enum.Enum):
        START = 1

    with pytest.raises(TypeError, match="is not a"):

        class Foreign(Machine[S]):
            FLOW = "foreign"
            STATES = S
            TABLE = {(S.START, Poke): edge("_on", Other.START)}  # noqa: RUF012
            CONTEXT = Ctx
            EMITS = frozenset()

            def _on(self, event: Poke) -> None: ...


def test_a_partial_machine_is_checked_in_the_machine_that_inherits_it() -> None:
    class Steps(Machine[S], partial=True):
        def _on_poke(self, event: Poke) -> tuple[list[object], S]:
            return [], S.WAITING

    class Whole(Steps):
        FLOW = "whole"
        STATES = S
        TABLE = TOY_TABLE
        CONTEXT = Ctx
        EMITS = frozenset()

    assert Whole(env()).handle(Poke(how="x")) == []

    with pytest.raises(TypeError, match="no handler"):

        class Short(Steps):
            FLOW = "short"
            STATES = S
            TABLE = {(S.START, Poke): edge("_missing", S.DONE)}  # noqa: RUF012
            CONTEXT = Ctx
            EMITS = frozenset()


def test_an_edge_needs_a_target() -> None:
    with pytest.raises(ValueError, match="at least one target"):
        edge("_on")


def test_fail_refuses_abstract_errors() -> None:
    from bastion.core.errors import ClientError

    with pytest.raises(TypeError, match="is abstract"):
        Fail(error=ClientError, message="x")
    assert Fail(error=InvalidArgument, message="m").exception().code == "invalid_argument"


@pytest.mark.parametrize("flow", sorted(MACHINES))
def test_state_diagram_has_every_edge(flow: str) -> None:
    cls = MACHINES[flow]
    dot = to_dot(cls.TABLE, flow)
    assert dot.startswith(f'digraph "{flow}" {{')
    drawn = set(re.findall(r'"(\w+)" -> "(\w+)" \[label="(\w+)"\]', dot))
    expected = {
        (state.name, target.name, event.__name__)
        for (state, event), entry in cls.TABLE.items()
        for target in entry.targets
    }
    assert drawn == expected
    assert dot.count(" -> ") == len(expected)


@pytest.mark.parametrize("flow", sorted(MACHINES))
def test_every_flow_module_opens_with_its_rules(flow: str) -> None:
    module = sys.modules[MACHINES[flow].__module__]
    assert module.__doc__ is not None
    assert "Rules / theory of operation" in module.__doc__
    source = pathlib.Path(module.__file__ or "").read_text()
    table_at = source.index("TABLE: Table[State] = {")
    machine_at = source.index(f"class {MACHINES[flow].__name__}(")
    assert table_at < machine_at, "the transition table comes before the machine"


def test_diagram_command_prints_every_flow(capsys: pytest.CaptureFixture[str]) -> None:
    from bastion.core.state_machines.__main__ import main

    main()
    out = capsys.readouterr().out
    # the authorize flow has its own policy; the passkey flows have their own walk
    flows = sorted([*MACHINES, "oauth_authorize", "passkey", "passkey_options"])
    assert [line for line in out.splitlines() if line.startswith("digraph")] == [
        f'digraph "{flow}" {{' for flow in flows
    ]
