"""Semantic model validation: error types with positions, and the server's 2056."""

from __future__ import annotations

import pytest

from bastion.core.fga.dsl_parser import parse_dsl
from bastion.core.fga.errors import ErrorCode, FgaError
from bastion.core.fga.model import model_from_json
from bastion.core.fga.validation import ModelError, check_model, validate_model
from tests.core.fga.support import HEADER


def errors(dsl: str) -> list[ModelError]:
    parsed = parse_dsl(HEADER + dsl)
    return validate_model(parsed.model, parsed)


def test_valid_model_has_no_errors() -> None:
    assert (
        errors(
            "type user\ntype group\n  relations\n    define member: [user, group#member]\n"
            "    define admin: [user] or member\n"
        )
        == []
    )


def test_missing_relation_points_at_the_reference() -> None:
    [error] = errors("type user\ntype doc\n  relations\n    define v: [user] or ghost\n")
    assert error == ModelError(
        "missing-definition", "the relation `ghost` does not exist.", "ghost", 5, 24, 29
    )


def test_loops_and_missing_entry_points() -> None:
    found = errors("type doc\n  relations\n    define a: b\n    define b: a\n")
    assert [(e.error_type, e.message, e.line, e.column) for e in found] == [
        (
            "relation-no-entry-point",
            "`a` is an impossible relation for `doc` (potential loop).",
            4,
            11,
        ),
        (
            "relation-no-entry-point",
            "`b` is an impossible relation for `doc` (potential loop).",
            5,
            11,
        ),
    ]
    [error] = errors(
        "type doc\n  relations\n    define parent: [doc]\n    define v: v from parent\n"
    )
    assert error.message == "`v` is an impossible relation for `doc` (no entrypoint)."


def test_restrictions_tuplesets_and_conditions() -> None:
    found = {
        e.error_type
        for e in errors(
            "type user\ntype doc\n  relations\n    define p: [doc, doc#q]\n"
            "    define q: [ghost, user with nope, user, user]\n    define r: q from p\n"
            "condition unused(x: int) {\n  x < 1\n}\n"
        )
    }
    assert found == {
        "invalid-type",
        "condition-not-defined",
        "duplicated-error",
        "tupleuserset-not-direct",
        "condition-not-used",
    }


def test_reserved_names_and_schema() -> None:
    assert errors("type self\n")[0].error_type == "reserved-type-keywords"
    parsed = parse_dsl("model\n  schema 1.0\ntype user\n")
    [error] = validate_model(parsed.model, parsed)
    assert (error.error_type, error.line, error.column) == ("invalid-schema", 1, 9)


def test_check_model_raises_2056_for_invalid_models_and_bad_cel() -> None:
    with pytest.raises(FgaError) as info:
        check_model(
            model_from_json(
                {
                    "schema_version": "1.1",
                    "type_definitions": [
                        {"type": "doc", "relations": {"a": {"computedUserset": {"relation": "zz"}}}}
                    ],
                }
            )
        )
    assert info.value.fga_code == ErrorCode.INVALID_AUTHORIZATION_MODEL
    parsed = parse_dsl(
        HEADER + "type user\ntype doc\n  relations\n    define v: [user with c]\n"
        "condition c(x: int) {\n  x <\n}\n"
    )
    with pytest.raises(FgaError) as info:
        check_model(parsed.model)
    assert info.value.fga_code == ErrorCode.INVALID_AUTHORIZATION_MODEL
    check_model(parse_dsl(HEADER + "type user\n").model)  # a valid model passes


def test_the_server_accepts_a_condition_no_relation_uses() -> None:
    """Only the language validator reports ``condition-not-used``; OpenFGA's server (and
    so ``fga model test``, recorded) accepts the model."""
    dsl = "type user\ntype doc\n  relations\n    define v: [user]\n"
    dsl += "condition unused(x: int) {\n  x < 1\n}\n"
    check_model(parse_dsl(HEADER + dsl).model)
    assert [e.error_type for e in errors(dsl)] == ["condition-not-used"]


def test_the_server_accepts_a_plain_restriction_after_a_conditioned_one() -> None:
    """``[user with c, user]``: the language validator calls it a duplicate; OpenFGA's server
    accepts it (abac_tests.yaml writes it). A plain restriction repeated is refused by both."""
    condition = "condition c(x: int) {\n  x < 1\n}\n"
    both = f"type user\ntype doc\n  relations\n    define v: [user with c, user]\n{condition}"
    check_model(parse_dsl(HEADER + both).model)
    assert [e.error_type for e in errors(both)] == ["duplicated-error"]
    twice = "type user\ntype doc\n  relations\n    define v: [user, user]\n"
    with pytest.raises(FgaError):
        check_model(parse_dsl(HEADER + twice).model)


_SHARED_VISIT = (
    "type user\ntype doc\n  relations\n    define parent: [doc]\n"
    "    define r0: [user]\n    define r0x: [user]\n    define r2: r0 and r0x\n"
    "    define r3: r0 and r2\n    define r4: r3 and r2\n"
    "    define r5: r4 from parent\n"
)


def test_server_entry_point_search_rejects_a_relation_reached_twice_behind_a_tupleset() -> None:
    # Found by the differential test (seed 1): OpenFGA's server rejects r5 because its
    # visited record is shared between the operands of r4's intersection, so r2, already
    # seen under r3, counts as having no entry point. The language validator accepts it.
    parsed = parse_dsl(HEADER + _SHARED_VISIT)
    assert validate_model(parsed.model, parsed) == []
    with pytest.raises(FgaError) as info:
        check_model(parsed.model)
    assert info.value.fga_code == ErrorCode.INVALID_AUTHORIZATION_MODEL
    assert str(info.value).endswith(
        "the definition of relation 'r5' in object type 'doc' is invalid: no entrypoints defined"
    )
    # r4 alone is fine: a top-level intersection gives each operand a fresh record.
    check_model(
        parse_dsl(HEADER + _SHARED_VISIT.replace("    define r5: r4 from parent\n", "")).model
    )


@pytest.mark.parametrize(
    ("relations", "cause"),
    [
        (
            "define admin: [user]\n    define a1: admin and a2 and a3\n"
            "    define a2: admin and a1 and a3\n    define a3: admin and a1 and a2\n",
            "potential loop",
        ),
        (
            "define admin: [user]\n    define a1: admin but not a2\n"
            "    define a2: admin but not a3\n    define a3: admin but not a1\n",
            "potential loop",
        ),
        (
            "define viewer: [doc#viewer] and editor\n    define editor: [user]\n",
            "no entrypoints defined",
        ),
        (
            "define viewer: [doc#viewer] but not editor\n    define editor: [user]\n",
            "no entrypoints defined",
        ),
    ],
)
def test_server_entry_point_errors_name_the_cause(relations: str, cause: str) -> None:
    with pytest.raises(FgaError) as info:
        check_model(parse_dsl(HEADER + "type user\ntype doc\n  relations\n    " + relations).model)
    assert info.value.fga_code == ErrorCode.INVALID_AUTHORIZATION_MODEL
    assert str(info.value).endswith(f": {cause}")
