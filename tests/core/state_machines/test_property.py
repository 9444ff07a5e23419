"""Every flow machine, driven generically (house style 12).

* An exhaustive walk feeds every machine, under every sample policy, every sample event its
  current state accepts, branching on copies: it must reach EVERY (state, event, target)
  edge of the transition table, and every step must satisfy the step invariants.
* Hypothesis drives each machine with event sequences that mostly follow what its last
  effect asked for and sometimes are arbitrary: after every event the machine is in a
  valid state with well-formed effects, or raised LocalFlowError and sits in ERROR; the
  generated runs together reach every (state, event) entry of the table.
* Every pair missing from a table raises LocalFlowError and ends in ERROR.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.errors import ClientError
from bastion.core.state_machines import MACHINES
from bastion.core.state_machines._machine import Event, Handoff, LocalFlowError, Machine
from bastion.core.state_machines.effects import Fail, Respond
from bastion.core.state_machines.events import UserLoaded
from bastion.core.state_machines.login import LoginRequested
from tests.core.state_machines.harness import (
    ALL_EVENT_TYPES,
    POLICIES,
    SAMPLES,
    SMS_CODE,
    STORED,
    STRONG,
    USUAL,
    CountingIds,
    FixedClock,
)
from tests.core.state_machines.harness import env as make_env

#: the MFA, MFA-enrolment and authorize flows have their own samples and walks
FLOWS = sorted(set(MACHINES) - {"mfa", "mfa_setup", "oauth_authorize"})
#: generated runs per flow where the default 500 do not reach every table entry reliably
EXAMPLES = {"password_reset": 1200}
Edge = tuple[Any, type[Event], Any]


def flow_env(policy: AuthPolicy) -> FlowEnv:
    return FlowEnv(policy=policy, clock=FixedClock(), ids=CountingIds())


def accepted_in(cls: type[Machine[Any]], state: Any) -> list[type[Event]]:
    return [event for (s, event) in cls.TABLE if s is state]


def check_step(cls: type[Machine[Any]], machine: Machine[Any], effects: list[Any]) -> None:
    """What must hold after every successful ``handle``."""
    state = machine.state
    assert isinstance(state, cls.STATES)
    assert all(not e.replies for e in effects[:-1]), "only the last effect may await"
    outcomes = [e for e in effects if isinstance(e, Respond | Fail)]
    assert not outcomes or outcomes == effects[-1:], "Respond/Fail come last, once"
    accepted = accepted_in(cls, state)
    if accepted:
        assert effects, f"{state} waits for an event no effect asked for"
        assert set(effects[-1].replies) == set(accepted)
    elif state.name == "FAILED":
        fail = effects[-1]
        assert isinstance(fail, Fail)
        assert issubclass(fail.error, ClientError)
        assert fail.exception().message == fail.message != ""
    elif state.name == "DONE":
        assert isinstance(effects[-1], Respond)
        assert effects[-1].result.to_api_dict()
    else:
        # Handed over to another flow (MFA): what it did so far only acts.
        assert not any(e.replies for e in effects), f"{state} parks the flow waiting"
        assert not outcomes, f"{state} parks the flow with an answer"
        assert isinstance(effects[-1], Handoff), f"{state} parks without a handoff"
        assert effects[-1].flow in MACHINES
    for secret in (STRONG, STORED, SMS_CODE):
        assert secret not in repr(effects), "a secret leaked into an effect's repr"


#: passwords, hashes, codes, digests and tokens the samples carry: never in a flow's dict
SECRET_VALUES = (
    STRONG,
    STORED,
    SMS_CODE,
    "$argon2id$stored",
    "$argon2id$new",
    "d" * 64,
    "access.jwt",
    "id.jwt",
    "refresh.jwt",
    "session-blob",
)


def check_roundtrip(cls: type[Machine[Any]], machine: Machine[Any]) -> Machine[Any]:
    """Parked as JSON and restored, the flow is the same flow; secrets never serialise."""
    data = machine.to_dict()
    text = json.dumps(data)
    for secret in SECRET_VALUES:
        assert secret not in text, f"{secret!r} serialised in {machine.state}"
    restored = cls.from_dict(json.loads(text), flow_env(machine.policy))
    assert restored.state is machine.state
    assert restored.to_dict() == data
    return restored


@pytest.mark.parametrize("flow", FLOWS)
def test_exhaustive_walk_reaches_every_edge(flow: str) -> None:
    cls = MACHINES[flow]
    seen: set[Edge] = set()
    emitted: set[type[Any]] = set()
    visited: set[tuple[str, bool]] = set()
    queue: deque[Machine[Any]] = deque(cls(flow_env(p)) for p in POLICIES)
    while queue:
        machine = queue.popleft()
        for event_type in accepted_in(cls, machine.state):
            for event in SAMPLES[event_type]:
                child = copy.deepcopy(machine)
                before = child.state
                effects = child.handle(event)  # a legal event never raises
                seen.add((before, event_type, child.state))
                emitted.update(type(e) for e in effects)
                check_step(cls, child, effects)
                check_roundtrip(cls, child)
                key = (json.dumps(child.to_dict(), sort_keys=True), child.holds_secret)
                if key not in visited and accepted_in(cls, child.state):
                    visited.add(key)
                    queue.append(child)
    edges = {(s, e, t) for (s, e), entry in cls.TABLE.items() for t in entry.targets}
    missing = sorted(f"{s.name} --{e.__name__}--> {t.name}" for s, e, t in edges - seen)
    assert not missing
    assert seen <= edges
    # EMITS is exact: handle() refuses an undeclared effect, and nothing declared is unused
    assert emitted == cls.EMITS


def usually_first(items: list[Any], head: int = 1) -> st.SearchStrategy[Any]:
    """Sample lists open with their usual values: draw from the first ``head`` two times
    in three, so that runs go deep, and from the whole list otherwise, so they also stray."""
    return st.integers(0, 2).flatmap(lambda n: st.sampled_from(items[:head] if n else items))


@pytest.mark.parametrize("flow", FLOWS)
def test_arbitrary_event_sequences(flow: str) -> None:
    cls = MACHINES[flow]
    reached: set[tuple[Any, type[Event]]] = set()

    # Derandomized so the coverage assertion below is reproducible; with random seeds it
    # also holds (36 of 36 runs when written; password_reset, whose reset by SMS code runs
    # six steps deep, 12 of 12 at its own count). The exhaustive walk is the exact guarantee.
    @settings(max_examples=EXAMPLES.get(flow, 500), derandomize=True, database=None, deadline=None)
    @given(policy=usually_first(POLICIES, head=2), data=st.data())
    def run(policy: AuthPolicy, data: st.DataObject) -> None:
        machine = cls(flow_env(policy))
        wanted = accepted_in(cls, machine.state)
        for _ in range(data.draw(st.integers(1, 10), label="steps")):
            stray = not wanted or data.draw(st.integers(0, 7)) == 0
            event_type = data.draw(st.sampled_from(ALL_EVENT_TYPES if stray else wanted))
            event = data.draw(usually_first(SAMPLES[event_type], USUAL.get(event_type, 1)))
            before = machine.state
            try:
                effects = machine.handle(event)
            except LocalFlowError:
                assert machine.state.name == "ERROR"
                assert (before, event_type) not in cls.TABLE, "a legal event raised"
                with pytest.raises(LocalFlowError):
                    machine.handle(event)  # ERROR is terminal
                return
            assert machine.state in cls.TABLE[(before, event_type)].targets
            reached.add((before, event_type))
            check_step(cls, machine, effects)
            restored = check_roundtrip(cls, machine)
            if machine.resumable and data.draw(st.booleans()):
                machine = restored  # carry on from the parked copy
            wanted = list(effects[-1].replies) if effects and effects[-1].replies else []

    run()
    missing = sorted(f"{s.name} + {e.__name__}" for s, e in set(cls.TABLE) - reached)
    assert not missing, "generated runs never reached these table entries"


@pytest.mark.parametrize("flow", FLOWS)
def test_unlisted_pairs_raise_and_end_in_error(flow: str) -> None:
    cls = MACHINES[flow]
    for state in cls.STATES:
        for event_type in ALL_EVENT_TYPES:
            if (state, event_type) in cls.TABLE:
                continue
            parked = {**cls(make_env()).to_dict(), "state": state.name}
            machine = cls.from_dict(parked, make_env())
            with pytest.raises(LocalFlowError, match=f"{event_type.__name__} not allowed"):
                machine.handle(SAMPLES[event_type][0])
            assert machine.state.name == "ERROR"


def test_restored_flow_without_its_password_is_an_error() -> None:
    login = MACHINES["login"](make_env())
    login.handle(SAMPLES[LoginRequested][0])
    assert login.holds_secret
    restored = MACHINES["login"].from_dict(login.to_dict(), make_env())
    assert not restored.holds_secret
    with pytest.raises(LocalFlowError, match="password does not survive"):
        restored.handle(SAMPLES[UserLoaded][1])
    assert restored.state.name == "ERROR"


def test_from_dict_refuses_another_flow() -> None:
    data = MACHINES["login"](make_env()).to_dict()
    with pytest.raises(ValueError, match="not a signup flow"):
        MACHINES["signup"].from_dict(data, make_env())


def _damaged(part: str) -> dict[str, Any]:
    data = MACHINES["login"](make_env()).to_dict()
    if part == "state":
        data["state"] = "NOWHERE"
    elif part == "missing-fields":
        data["context"] = {}
    else:
        data["context"]["user"] = {"id": "u", "is_admin": True}
    return data


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ("state", "login has no state 'NOWHERE'"),
        ("missing-fields", "corrupt login context"),
        ("bad-user", "corrupt login context"),
    ],
)
def test_from_dict_refuses_damaged_data(part: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MACHINES["login"].from_dict(_damaged(part), make_env())
