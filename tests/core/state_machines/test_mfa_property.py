"""The MFA machine, driven generically (house style 12), as tests/core/state_machines/
test_property.py drives the other flows:

* an exhaustive walk feeds every state every sample event it accepts, branching on
  copies, and must reach EVERY (state, event, target) edge of the table;
* Hypothesis drives it with sequences that mostly answer what the last effect asked for
  and sometimes are arbitrary: after every event the machine is in a valid state with
  well-formed effects, or raised LocalFlowError and sits in ERROR for good;
* every pair missing from the table raises LocalFlowError and ends in ERROR.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bastion.core.errors import ClientError
from bastion.core.state_machines._machine import Event, LocalFlowError
from bastion.core.state_machines.effects import Fail, Respond
from bastion.core.state_machines.mfa import MfaMachine, State, VerifyOtpRequested
from bastion.core.state_machines.mfa_effects import ChallengeLoaded
from tests.core.state_machines.harness import env
from tests.core.state_machines.mfa_samples import (
    ALL_EVENT_TYPES,
    DIGEST,
    RECOVERY_DIGEST,
    SAMPLES,
    SCENARIOS,
    SECRETS,
)

Edge = tuple[State, type[Event], State]


def accepted_in(state: State) -> list[type[Event]]:
    return [event for (s, event) in MfaMachine.TABLE if s is state]


def check_step(machine: MfaMachine, effects: list[Any]) -> None:
    state = machine.state
    assert isinstance(state, State)
    assert all(not e.replies for e in effects[:-1]), "only the last effect may await"
    outcomes = [e for e in effects if isinstance(e, Respond | Fail)]
    assert not outcomes or outcomes == effects[-1:], "Respond/Fail come last, once"
    accepted = accepted_in(state)
    if accepted:
        assert effects, f"{state} waits for an event no effect asked for"
        assert set(effects[-1].replies) == set(accepted)
    elif state is State.FAILED:
        fail = effects[-1]
        assert isinstance(fail, Fail)
        assert issubclass(fail.error, ClientError)
        assert not machine.holds_secret, "a failed verify still holds the code"
    else:
        assert state is State.DONE
        assert isinstance(effects[-1], Respond)
        assert effects[-1].result.to_api_dict()["message"]
    for secret in SECRETS:
        assert secret not in repr(effects), "a secret leaked into an effect's repr"


def check_roundtrip(machine: MfaMachine) -> MfaMachine:
    data = machine.to_dict()
    text = json.dumps(data)
    # the tokens of the session kept before the challenge is taken are secrets too
    issued = ("access.jwt", "id.jwt", "refresh.jwt", "session-blob")
    for secret in (*SECRETS, *issued, DIGEST, RECOVERY_DIGEST, "$argon2id$stored"):
        assert secret not in text
    restored = MfaMachine.from_dict(json.loads(text), env())
    assert restored.state is machine.state
    assert restored.to_dict() == data
    return restored


def test_exhaustive_walk_reaches_every_edge() -> None:
    seen: set[Edge] = set()
    emitted: set[type[Any]] = set()
    visited: set[tuple[str, str | None]] = set()
    queue: deque[MfaMachine] = deque([MfaMachine(env())])
    while queue:
        machine = queue.popleft()
        for event_type in accepted_in(machine.state):
            for event in SAMPLES[event_type]:
                child = copy.deepcopy(machine)
                before = child.state
                effects = child.handle(event)  # a legal event never raises
                seen.add((before, event_type, child.state))
                emitted.update(type(e) for e in effects)
                check_step(child, effects)
                check_roundtrip(child)
                key = (json.dumps(child.to_dict(), sort_keys=True), child._secret)
                if key not in visited and accepted_in(child.state):
                    visited.add(key)
                    queue.append(child)
    edges = {(s, e, t) for (s, e), entry in MfaMachine.TABLE.items() for t in entry.targets}
    missing = sorted(f"{s.name} --{e.__name__}--> {t.name}" for s, e, t in edges - seen)
    assert not missing
    assert seen <= edges
    assert emitted == MfaMachine.EMITS


def usually(usual: Event, items: list[Event]) -> st.SearchStrategy[Event]:
    """Half the time the scenario's usual sample, so that runs go deep; else any, so that
    they also take every branch."""
    return st.booleans().flatmap(lambda pick: st.just(usual) if pick else st.sampled_from(items))


def test_arbitrary_event_sequences() -> None:
    reached: set[tuple[State, type[Event]]] = set()

    @settings(max_examples=800, derandomize=True, database=None, deadline=None)
    @given(scenario=st.sampled_from(SCENARIOS), data=st.data())
    def run(scenario: dict[type[Event], Event], data: st.DataObject) -> None:
        machine = MfaMachine(env())
        wanted = accepted_in(machine.state)
        for _ in range(data.draw(st.integers(1, 14), label="steps")):
            stray = not wanted or data.draw(st.integers(0, 11)) == 0
            event_type = data.draw(st.sampled_from(ALL_EVENT_TYPES if stray else wanted))
            usual = scenario.get(event_type, SAMPLES[event_type][0])
            event = data.draw(usually(usual, SAMPLES[event_type]))
            before = machine.state
            try:
                effects = machine.handle(event)
            except LocalFlowError:
                assert machine.state is State.ERROR
                with pytest.raises(LocalFlowError):
                    machine.handle(event)  # ERROR is terminal
                return
            assert machine.state in MfaMachine.TABLE[(before, event_type)].targets
            reached.add((before, event_type))
            check_step(machine, effects)
            restored = check_roundtrip(machine)
            if machine.resumable and data.draw(st.booleans()):
                machine = restored  # carry on from the parked copy
            wanted = list(effects[-1].replies) if effects and effects[-1].replies else []

    run()
    missing = sorted(f"{s.name} + {e.__name__}" for s, e in set(MfaMachine.TABLE) - reached)
    assert not missing, "generated runs never reached these table entries"


def test_unlisted_pairs_raise_and_end_in_error() -> None:
    for state in State:
        for event_type in ALL_EVENT_TYPES:
            if (state, event_type) in MfaMachine.TABLE:
                continue
            parked = {**MfaMachine(env()).to_dict(), "state": state.name}
            machine = MfaMachine.from_dict(parked, env())
            with pytest.raises(LocalFlowError, match=f"{event_type.__name__} not allowed"):
                machine.handle(SAMPLES[event_type][0])
            assert machine.state is State.ERROR


def test_a_verify_restored_mid_flight_lost_its_code_and_is_an_error() -> None:
    machine = MfaMachine(env())
    machine.handle(SAMPLES[VerifyOtpRequested][0])
    assert machine.holds_secret
    restored = MfaMachine.from_dict(machine.to_dict(), env())
    with pytest.raises(LocalFlowError, match="does not survive"):
        restored.handle(SAMPLES[ChallengeLoaded][0])
    assert restored.state is State.ERROR
