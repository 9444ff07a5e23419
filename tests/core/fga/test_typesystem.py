"""TypeSystem.tuple_problem: its answers, and the bound on the answers it keeps."""

from __future__ import annotations

import pytest

from bastion.core.fga import typesystem
from tests.core.fga.support import key, world

MODEL = """type user
type doc
  relations
    define viewer: [user]
"""


def test_the_kept_answers_are_bounded_and_stay_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(typesystem, "VALIDITY_CACHE_ENTRIES", 8)
    ts, _ = world(MODEL)
    for n in range(50):
        assert ts.tuple_problem(key(f"doc:{n}#viewer@user:u{n}")) is None
        assert ts.tuple_problem(key(f"doc:{n}#viewer@doc:{n}")) is not None
        assert len(ts._valid_cache) <= 8
    # After many starts over, answers are the same as the first time.
    assert ts.tuple_problem(key("doc:0#viewer@user:u0")) is None
    assert ts.tuple_problem(key("doc:0#owner@user:u0")) == "relation 'doc#owner' not found"
