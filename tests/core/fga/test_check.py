"""Check: every rewrite kind, cycles, depth, contextual tuples, invalid tuples, errors."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bastion.core.errors import InvalidArgument
from bastion.core.fga.check import Checker, check
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.request import RequestContext, RequestOptions
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from tests.core.fga.support import key, world

DOCS = """type user
type group
  relations
    define member: [user, user:*, group#member]
type folder
  relations
    define viewer: [user, group#member]
type doc
  relations
    define parent: [folder]
    define owner: [user]
    define blocked: [user]
    define editor: [user] or owner
    define viewer: [user, user:*, group#member] or editor or viewer from parent
    define both: [user] and editor
    define can_view: viewer but not blocked
"""


def allowed(ts, store, tuple_text: str, **options) -> bool:  # type: ignore[no-untyped-def]
    k = key(tuple_text)
    return check(ts, store, k.object, k.relation, k.user, RequestOptions(**options))


@pytest.mark.parametrize(
    ("tuples", "question", "expected"),
    [
        # direct
        (["doc:1#viewer@user:anne"], "doc:1#viewer@user:anne", True),
        (["doc:1#viewer@user:anne"], "doc:1#viewer@user:bob", False),
        # public wildcard admits any user, but user:* only matches itself
        (["doc:1#viewer@user:*"], "doc:1#viewer@user:bob", True),
        (["doc:1#viewer@user:*"], "doc:1#viewer@user:*", True),
        (["doc:1#viewer@user:anne"], "doc:1#viewer@user:*", False),
        # userset, nested userset
        (
            ["doc:1#viewer@group:eng#member", "group:eng#member@user:anne"],
            "doc:1#viewer@user:anne",
            True,
        ),
        (
            [
                "doc:1#viewer@group:eng#member",
                "group:eng#member@group:ops#member",
                "group:ops#member@user:anne",
            ],
            "doc:1#viewer@user:anne",
            True,
        ),
        (["doc:1#viewer@group:eng#member"], "doc:1#viewer@group:eng#member", True),
        # computed userset
        (["doc:1#owner@user:anne"], "doc:1#editor@user:anne", True),
        (["doc:1#owner@user:anne"], "doc:1#viewer@user:anne", True),
        # tuple to userset
        (["doc:1#parent@folder:x", "folder:x#viewer@user:anne"], "doc:1#viewer@user:anne", True),
        (["doc:1#parent@folder:x", "folder:y#viewer@user:anne"], "doc:1#viewer@user:anne", False),
        # intersection
        (["doc:1#both@user:anne", "doc:1#owner@user:anne"], "doc:1#both@user:anne", True),
        (["doc:1#both@user:anne"], "doc:1#both@user:anne", False),
        # exclusion
        (["doc:1#viewer@user:anne"], "doc:1#can_view@user:anne", True),
        (["doc:1#viewer@user:anne", "doc:1#blocked@user:anne"], "doc:1#can_view@user:anne", False),
        # the userset itself, also reached through a computed relation
        ([], "group:eng#member@group:eng#member", True),
        ([], "doc:1#editor@doc:1#owner", True),
    ],
)
def test_rewrite_kinds(tuples: list[str], question: str, expected: bool) -> None:
    ts, store = world(DOCS, *tuples)
    assert allowed(ts, store, question) is expected


def test_cycles_through_tuples_evaluate_false() -> None:
    ts, store = world(DOCS, "group:a#member@group:b#member", "group:b#member@group:a#member")
    assert allowed(ts, store, "group:a#member@user:anne") is False
    ts, store = world(
        "type user\ntype doc\n  relations\n    define blocked: [user, doc#viewer]\n"
        "    define viewer: [user] but not blocked\n",
        "doc:1#viewer@user:anne",
        "doc:1#blocked@doc:1#viewer",
    )
    # The subtract side cycles back to viewer: a cycle there makes the whole thing false.
    assert allowed(ts, store, "doc:1#viewer@user:anne") is False


class _FailingOnce(MemoryTupleReader):
    """A store whose first userset read fails (a driver's I/O error, say)."""

    failed = False

    def read_usersets(self, obj: str, relation: str) -> Sequence[TupleKey]:
        if not self.failed:
            self.failed = True
            raise OSError("store unavailable")
        return super().read_usersets(obj, relation)


def test_a_checker_answers_again_after_a_read_raised() -> None:
    # The memo marks the steps on the path while they are evaluated: an exception leaving
    # them marked must not make the next check of the same Checker see a cycle.
    ts, _ = world(DOCS)
    store = _FailingOnce([key("group:a#member@group:b#member"), key("group:b#member@user:anne")])
    checker = Checker(RequestContext(ts, store, RequestOptions()))
    with pytest.raises(OSError, match="store unavailable"):
        checker.check("group:a", "member", "user:anne")
    assert checker.check("group:a", "member", "user:anne") is True


def chain(length: int) -> tuple[object, object]:
    tuples = [f"group:{i}#member@group:{i + 1}#member" for i in range(length)]
    return world(DOCS, *tuples, f"group:{length}#member@user:anne")


def test_depth_limit_25_raises_2002() -> None:
    ts, store = chain(23)
    assert allowed(ts, store, "group:0#member@user:anne") is True
    ts, store = chain(25)
    with pytest.raises(FgaError) as info:
        allowed(ts, store, "group:0#member@user:anne")
    assert info.value.fga_code == ErrorCode.RESOLUTION_TOO_COMPLEX
    assert isinstance(info.value, InvalidArgument)


def test_a_true_branch_swallows_a_depth_error() -> None:
    ts, store = chain(30)
    store.write(key("group:0#member@user:anne"))
    assert allowed(ts, store, "group:0#member@user:anne") is True


def test_contextual_tuples_apply_to_one_request_only() -> None:
    ts, store = world(DOCS)
    extra = [key("doc:1#owner@user:anne")]
    assert allowed(ts, store, "doc:1#viewer@user:anne", contextual_tuples=extra) is True
    assert allowed(ts, store, "doc:1#viewer@user:anne") is False
    assert len(store) == 0


def test_invalid_contextual_tuple_is_2027() -> None:
    ts, store = world(DOCS)
    for bad in (
        "doc:1#owner@user:*",
        "doc:1#nope@user:anne",
        "doc:1#parent@folder:x#viewer",
        "doc:1#owner@ghost:anne",
    ):
        with pytest.raises(FgaError) as info:
            allowed(ts, store, "doc:1#viewer@user:anne", contextual_tuples=[key(bad)])
        assert info.value.fga_code == ErrorCode.INVALID_TUPLE, bad


@pytest.mark.parametrize(
    "question",
    [
        "doc:1#nope@user:anne",
        "ghost:1#viewer@user:anne",
        "doc:1#viewer@ghost:anne",
        "doc:1#viewer@user:a:b",
        "doc:1#viewer@group:eng#nope",
        "doc:*#viewer@user:anne",
    ],
)
def test_bad_request_tuple_is_2000(question: str) -> None:
    ts, store = world(DOCS)
    with pytest.raises(FgaError) as info:
        allowed(ts, store, question)
    assert info.value.fga_code == ErrorCode.VALIDATION_ERROR


def test_stored_tuples_the_current_model_rejects_are_ignored() -> None:
    ts, store = world(
        "type user\ntype employee\ntype doc\n  relations\n    define viewer: [user]\n",
        "doc:1#viewer@employee:anne",
        "doc:1#viewer@user:*",
        "doc:1#gone@user:bob",
    )
    assert allowed(ts, store, "doc:1#viewer@employee:anne") is False
    assert allowed(ts, store, "doc:1#viewer@user:bob") is False


CONDITIONAL = """type user
type doc
  relations
    define viewer: [user with small, user]
    define editor: [user with small]
condition small(x: int) {
  x < 10
}
"""


def test_conditions_request_context_tuple_context_and_missing_parameters() -> None:
    ts, store = world(
        CONDITIONAL,
        key("doc:1#editor@user:anne", "small"),
        key("doc:1#editor@user:bob", "small", {"x": 3}),
    )
    assert allowed(ts, store, "doc:1#editor@user:anne", context={"x": 1}) is True
    assert allowed(ts, store, "doc:1#editor@user:anne", context={"x": 11}) is False
    # the stored context wins over the request's
    assert allowed(ts, store, "doc:1#editor@user:bob", context={"x": 50}) is True
    with pytest.raises(FgaError) as info:
        allowed(ts, store, "doc:1#editor@user:anne")
    assert info.value.fga_code == ErrorCode.VALIDATION_ERROR


def test_condition_error_is_swallowed_when_another_path_grants() -> None:
    ts, store = world(CONDITIONAL + "", key("doc:1#viewer@user:anne", "small"))
    with pytest.raises(FgaError):
        allowed(ts, store, "doc:1#viewer@user:anne")
    ts, store = world(
        CONDITIONAL.replace(
            "define editor: [user with small]",
            "define editor: [user with small]\n    define any: editor or viewer",
        ),
        key("doc:1#editor@user:anne", "small"),
        "doc:1#viewer@user:anne",
    )
    assert allowed(ts, store, "doc:1#any@user:anne") is True


def test_tuple_with_a_condition_the_model_no_longer_binds_is_ignored() -> None:
    ts, store = world(
        "type user\ntype doc\n  relations\n    define viewer: [user]\n",
        key("doc:1#viewer@user:anne", "small"),
    )
    assert allowed(ts, store, "doc:1#viewer@user:anne") is False
