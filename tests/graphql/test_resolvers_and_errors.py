"""Resolver binding, the deprecated operations, error rendering and the custom scalars."""

from __future__ import annotations

import logging
from typing import Any

import graphql
import pytest
import trio
import trio.lowlevel

from bastion.core import errors as core_errors
from bastion.core.errors import BastionError, NotFound
from bastion.transports.graphql import DEPRECATED_OPERATIONS, build_schema, execute_operation
from bastion.transports.graphql.scalars import install_scalars

USER = {
    "id": "u1",
    "email": "u@example.com",
    "email_verified": True,
    "signup_methods": "basic_auth",
    "phone_number_verified": False,
    "roles": ["user"],
    "created_at": 1_700_000_000,
    "app_data": {"plan": "pro", "seats": 3},
}


async def run(schema: graphql.GraphQLSchema, query: str, **kwargs: Any) -> dict[str, Any]:
    variables = kwargs.pop("variables", None)
    context = kwargs.pop("context", None)
    return await execute_operation(schema, query, variables, None, context, **kwargs)


def codes(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["message"], e["extensions"]["code"]) for e in result["errors"]]


# ---------------------------------------------------------------- binding


async def test_a_bound_resolver_gets_the_context_and_the_coerced_arguments() -> None:
    seen: list[tuple[Any, dict[str, Any]]] = []

    async def login(context: Any, args: dict[str, Any]) -> dict[str, Any]:
        seen.append((context, args))
        await trio.lowlevel.checkpoint()
        return {"message": "Logged in successfully", "expires_in": 1800, "user": USER}

    schema = build_schema({"login": login})
    context = object()
    result = await run(
        schema,
        "mutation login($data: LoginRequest!) { login(params: $data) { message expires_in "
        "user { id email roles created_at app_data } } }",
        variables={"data": {"email": "u@example.com", "password": "pw", "roles": ["user"]}},
        context=context,
    )
    assert result == {
        "data": {
            "login": {
                "message": "Logged in successfully",
                "expires_in": 1800,
                "user": {
                    "id": "u1",
                    "email": "u@example.com",
                    "roles": ["user"],
                    "created_at": 1_700_000_000,
                    "app_data": {"plan": "pro", "seats": 3},
                },
            }
        }
    }
    assert seen == [
        (context, {"params": {"email": "u@example.com", "password": "pw", "roles": ["user"]}})
    ]


async def test_singular_param_reaches_the_resolver_as_param() -> None:
    async def revoke_access(_context: Any, args: dict[str, Any]) -> dict[str, str]:
        return {"message": f"revoked {args['param']['user_id']}"}

    schema = build_schema({"_revoke_access": revoke_access})
    result = await run(schema, 'mutation { _revoke_access(param: {user_id: "u1"}) { message } }')
    assert result == {"data": {"_revoke_access": {"message": "revoked u1"}}}


async def test_invite_members_answers_capitalised_users() -> None:
    async def invite(_context: Any, _args: dict[str, Any]) -> dict[str, Any]:
        return {"message": "invited", "Users": [{"id": "u1", "email": "u@example.com"}]}

    schema = build_schema({"_invite_members": invite})
    result = await run(
        schema,
        'mutation { _invite_members(params: {emails: ["u@example.com"]}) '
        "{ message Users { id email } } }",
    )
    assert result == {
        "data": {
            "_invite_members": {
                "message": "invited",
                "Users": [{"id": "u1", "email": "u@example.com"}],
            }
        }
    }


async def test_resolvers_may_return_objects() -> None:
    class Response:
        message = "session valid"

    async def admin_session(_context: Any, _args: dict[str, Any]) -> Response:
        return Response()

    schema = build_schema({"_admin_session": admin_session})
    assert await run(schema, "{ _admin_session { message } }") == {
        "data": {"_admin_session": {"message": "session valid"}}
    }


async def test_an_unbound_operation_fails_instead_of_answering_null() -> None:
    result = await run(build_schema(), "{ profile { id } }")
    assert result["data"] is None
    assert codes(result) == [("not implemented in this build", "unimplemented")]
    assert result["errors"][0]["path"] == ["profile"]


def test_binding_an_unknown_name_is_refused() -> None:
    async def nothing(_context: Any, _args: dict[str, Any]) -> None:
        return None

    with pytest.raises(ValueError, match="not root fields of the schema: logn"):
        build_schema({"logn": nothing})


@pytest.mark.parametrize("name", sorted(DEPRECATED_OPERATIONS))
def test_binding_a_deprecated_operation_is_refused(name: str) -> None:
    async def revived(_context: Any, _args: dict[str, Any]) -> None:
        return None

    with pytest.raises(ValueError, match=f"deprecated operations cannot be bound: {name}"):
        build_schema({name: revived})


def test_each_build_is_independent() -> None:
    async def meta(_context: Any, _args: dict[str, Any]) -> None:
        return None

    bound = build_schema({"meta": meta})
    unbound = build_schema()
    assert bound.query_type is not None
    assert unbound.query_type is not None
    assert bound.query_type.fields["meta"].resolve is not unbound.query_type.fields["meta"].resolve


# ---------------------------------------------------------------- deprecated operations

DEPRECATED_CALLS = {
    "_update_env": "mutation { _update_env(params: {}) { message } }",
    "_admin_signup": 'mutation { _admin_signup(params: {admin_secret: "s"}) { message } }',
    "_generate_jwt_keys": 'mutation { _generate_jwt_keys(params: {type: "RS256"}) { secret } }',
    "_env": "{ _env { CLIENT_ID } }",
    "mobile_signup": 'mutation { mobile_signup(params: {phone_number: "+1", password: "p", '
    'confirm_password: "p"}) { message } }',
    "mobile_login": 'mutation { mobile_login(params: {phone_number: "+1", password: "p"}) '
    "{ message } }",
}

EXPECTED_DEPRECATION = {
    "_update_env": "deprecated. please configure env via cli args",
    "_admin_signup": "deprecated. please configure admin secret via cli args",
    "_generate_jwt_keys": "deprecated. please configure jwt keys via cli args",
    "_env": "deprecated",
    "mobile_signup": "deprecated, use signup with mobile phone_number",
    "mobile_login": "deprecated, use login with mobile phone_number",
}


def test_every_deprecated_operation_is_covered() -> None:
    assert set(DEPRECATED_CALLS) == set(DEPRECATED_OPERATIONS) == set(EXPECTED_DEPRECATION)


@pytest.mark.parametrize("name", sorted(DEPRECATED_CALLS))
async def test_deprecated_operation_answers_its_message(name: str) -> None:
    result = await run(build_schema(), DEPRECATED_CALLS[name])
    assert result["data"] is None
    assert codes(result) == [(EXPECTED_DEPRECATION[name], "unimplemented")]
    assert result["errors"][0]["path"] == [name]


# ---------------------------------------------------------------- error rendering


def leaves() -> list[type[BastionError]]:
    found: list[type[BastionError]] = []
    for name in core_errors.__all__:
        cls = getattr(core_errors, name)
        if isinstance(cls, type) and issubclass(cls, BastionError) and not cls._abstract:
            found.append(cls)
    return found


def raising(error: BaseException) -> Any:
    async def resolve(_context: Any, _args: dict[str, Any]) -> Any:
        await trio.lowlevel.checkpoint()
        raise error

    return resolve


@pytest.mark.parametrize("leaf", leaves(), ids=lambda cls: cls.__name__)
async def test_a_bastion_error_shows_its_message_and_code(leaf: type[BastionError]) -> None:
    schema = build_schema({"logout": raising(leaf("the caller-facing message"))})
    result = await run(schema, "mutation { logout { message } }")
    assert result == {
        "data": None,
        "errors": [
            {
                "message": "the caller-facing message",
                "locations": [{"line": 1, "column": 12}],
                "path": ["logout"],
                "extensions": {"code": leaf.code},
            }
        ],
    }


async def test_a_bastion_error_inside_a_one_member_group_is_seen_through() -> None:
    group = ExceptionGroup("from a nursery", [NotFound("user not found")])
    result = await run(
        build_schema({"_user": raising(group)}), '{ _user(params: {id: "x"}) { id } }'
    )
    assert codes(result) == [("user not found", "not_found")]


async def test_any_other_exception_is_internal_and_tells_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "postgresql://admin:hunter2@db/bastion refused"
    schema = build_schema({"meta": raising(RuntimeError(secret))})
    with caplog.at_level(logging.ERROR, logger="bastion.graphql"):
        result = await run(schema, "{ meta { version } }")
    assert result == {
        "data": None,
        "errors": [
            {
                "message": "internal server error",
                "locations": [{"line": 1, "column": 3}],
                "path": ["meta"],
                "extensions": {"code": "internal"},
            }
        ],
    }
    assert "hunter2" not in repr(result)
    # The operator still gets the real cause, with its traceback, in the log.
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.getMessage() == "unexpected error resolving meta"
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert record.exc_info[2] is not None


async def test_a_resolver_returning_null_for_a_non_null_field_is_internal() -> None:
    async def nothing(_context: Any, _args: dict[str, Any]) -> dict[str, Any]:
        return {"message": None}

    result = await run(build_schema({"logout": nothing}), "mutation { logout { message } }")
    assert codes(result) == [("internal server error", "internal")]
    assert result["errors"][0]["path"] == ["logout", "message"]


async def test_a_syntax_error_is_invalid_argument() -> None:
    result = await run(build_schema(), "{ meta { version }")
    assert result["data"] is None
    assert result["errors"][0]["message"].startswith("Syntax Error: Expected Name, found <EOF>.")
    assert result["errors"][0]["extensions"] == {"code": "invalid_argument"}


async def test_a_validation_error_is_invalid_argument() -> None:
    result = await run(build_schema(), "{ meta { colour } }")
    assert codes(result) == [("Cannot query field 'colour' on type 'Meta'.", "invalid_argument")]


async def test_a_bad_variable_is_invalid_argument() -> None:
    result = await run(
        build_schema(),
        "query q($p: ListUsersRequest) { _users(params: $p) { users { id } } }",
        variables={"p": {"pagination": {"limit": "ten"}}},
    )
    assert result["data"] is None
    [(message, code)] = codes(result)
    assert code == "invalid_argument"
    assert message.startswith("Variable '$p' has invalid value at .pagination.limit")


async def test_variables_must_be_an_object() -> None:
    result = await execute_operation(build_schema(), "{ meta { version } }", [1], None, None)  # type: ignore[arg-type]
    assert codes(result) == [("variables must be a JSON object", "invalid_argument")]


async def test_a_missing_operation_name_is_invalid_argument() -> None:
    result = await execute_operation(
        build_schema(), "query a { __typename } query b { __typename }", None, None, None
    )
    assert codes(result) == [
        ("Must provide operation name if query contains multiple operations.", "invalid_argument")
    ]


# ---------------------------------------------------------------- scalars


def echo(field: str) -> Any:
    async def resolve(_context: Any, args: dict[str, Any]) -> Any:
        return {field: args}

    return resolve


async def test_int64_accepts_integers_and_decimal_strings() -> None:
    seen: list[dict[str, Any]] = []

    async def users(_context: Any, args: dict[str, Any]) -> dict[str, Any]:
        seen.append(args)
        pagination = args["params"]["pagination"]
        return {
            "pagination": {**pagination, "offset": 0, "total": 2**63 - 1},
            "users": [],
        }

    schema = build_schema({"_users": users})
    query = (
        "query q($p: ListUsersRequest) { _users(params: $p) { pagination { limit page total } } }"
    )
    result = await run(schema, query, variables={"p": {"pagination": {"limit": "10", "page": 2}}})
    assert result == {
        "data": {"_users": {"pagination": {"limit": 10, "page": 2, "total": 2**63 - 1}}}
    }
    literal = '{ _users(params: {pagination: {limit: 5, page: "-3"}}) { pagination { page } } }'
    assert (await run(schema, literal))["data"] == {"_users": {"pagination": {"page": -3}}}
    assert seen[0] == {"params": {"pagination": {"limit": 10, "page": 2}}}


@pytest.mark.parametrize("bad", [True, 1.5, "1e3", " 1", "+", 2**63, "", [1]])
async def test_int64_refuses_what_is_not_a_64_bit_integer(bad: Any) -> None:
    schema = build_schema({"_users": echo("unused")})
    result = await run(
        schema,
        "query q($p: ListUsersRequest) { _users(params: $p) { users { id } } }",
        variables={"p": {"pagination": {"limit": bad}}},
    )
    assert result["data"] is None
    assert codes(result)[0][1] == "invalid_argument"


async def test_int64_output_refuses_non_integers() -> None:
    async def user(_context: Any, _args: dict[str, Any]) -> dict[str, Any]:
        return {**USER, "created_at": "yesterday"}

    result = await run(
        build_schema({"_user": user}), '{ _user(params: {id: "u1"}) { id created_at } }'
    )
    assert result["data"] == {"_user": {"id": "u1", "created_at": None}}
    assert codes(result) == [("internal server error", "internal")]


async def test_map_round_trips_objects_from_variables_and_literals() -> None:
    async def validate_jwt(_context: Any, args: dict[str, Any]) -> dict[str, Any]:
        return {"is_valid": True, "claims": {"sub": "u1", "roles": ["user"], "exp": 1}}

    async def update_profile(_context: Any, args: dict[str, Any]) -> dict[str, str]:
        return {"message": repr(args["params"]["app_data"])}

    schema = build_schema({"validate_jwt_token": validate_jwt, "update_profile": update_profile})
    result = await run(
        schema,
        '{ validate_jwt_token(params: {token_type: "access_token", token: "t"}) '
        "{ is_valid claims } }",
    )
    assert result == {
        "data": {
            "validate_jwt_token": {
                "is_valid": True,
                "claims": {"sub": "u1", "roles": ["user"], "exp": 1},
            }
        }
    }
    literal = 'mutation { update_profile(params: {app_data: {a: 1, b: ["x", null]}}) { message } }'
    assert (await run(schema, literal))["data"] == {
        "update_profile": {"message": "{'a': 1, 'b': ['x', None]}"}
    }
    variable = "mutation m($d: Map) { update_profile(params: {app_data: $d}) { message } }"
    assert (await run(schema, variable, variables={"d": {"nested": {"k": True}}}))["data"] == {
        "update_profile": {"message": "{'nested': {'k': True}}"}
    }


@pytest.mark.parametrize("bad", ["[1, 2]", '"text"', "3"])
async def test_map_refuses_a_literal_that_is_not_an_object(bad: str) -> None:
    query = f"mutation {{ update_profile(params: {{app_data: {bad}}}) {{ message }} }}"
    result = await run(build_schema(), query)
    assert result["data"] is None
    assert codes(result)[0][1] == "invalid_argument"


async def test_map_refuses_a_variable_that_is_not_an_object() -> None:
    query = "mutation m($d: Map) { update_profile(params: {app_data: $d}) { message } }"
    result = await run(build_schema(), query, variables={"d": [1, 2]})
    assert codes(result)[0][1] == "invalid_argument"


async def test_any_passes_json_values_through() -> None:
    schema = graphql.build_schema("scalar Any type Query { echo(v: Any): Any }")
    install_scalars(schema)
    assert schema.query_type is not None

    async def resolve_echo(_root: object, _info: Any, v: Any = None) -> Any:
        return v

    schema.query_type.fields["echo"].resolve = resolve_echo
    for literal, value in [
        ("1", 1),
        ('"s"', "s"),
        ("[1, {a: null}]", [1, {"a": None}]),
        ("{x: [true]}", {"x": [True]}),
    ]:
        assert await run(schema, f"{{ echo(v: {literal}) }}") == {"data": {"echo": value}}
    result = await run(schema, "query q($v: Any) { echo(v: $v) }", variables={"v": {"k": [1.5]}})
    assert result == {"data": {"echo": {"k": [1.5]}}}
