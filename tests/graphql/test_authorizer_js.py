"""authorizer-js 3.0.1's own documents, with the variables it sent, run in-process.

The capture (``data/authorizer_js_3.0.1_operations.graphql``) has every GraphQL call the
client makes, each after a comment giving its variables. Each is run through the
limits, validation and the trio executor against stub resolvers that return a complete
value of the field's type: the client's selections, the scalars (``Int64``, ``Map``) and
the nullability must all work, and the resolver must receive what the client sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from graphql import GraphQLNonNull, GraphQLObjectType, parse

from bastion.transports.graphql import DEFAULT_LIMITS, build_schema, execute_operation
from bastion.transports.graphql.limits import check_operation_limits

CAPTURE = Path(__file__).parent / "data" / "authorizer_js_3.0.1_operations.graphql"


def captured_calls() -> list[tuple[str, str, dict[str, Any]]]:
    """(call name, document, variables) for each GraphQL call in the capture."""
    calls: list[tuple[str, str, dict[str, Any]]] = []
    header = ""
    for line in CAPTURE.read_text(encoding="utf-8").splitlines():
        if line.startswith("# ---- ") and "variables example: " in line:
            header = line
        elif line.strip() and not line.startswith("#"):
            name = header.removeprefix("# ---- ").split(":", 1)[0]
            variables = json.loads(header.split("variables example: ", 1)[1])
            calls.append((name, line, variables))
    assert len(calls) == 19
    return calls


USER = {
    "id": "7b0b7cda-0000-4000-8000-000000000001",
    "email": "u@example.com",
    "email_verified": True,
    "given_name": "U",
    "family_name": None,
    "middle_name": None,
    "nickname": None,
    "preferred_username": "u@example.com",
    "picture": None,
    "signup_methods": "basic_auth",
    "gender": None,
    "birthdate": None,
    "phone_number": None,
    "phone_number_verified": False,
    "roles": ["user"],
    "created_at": 1_781_000_000,
    "updated_at": 1_781_000_000,
    "revoked_timestamp": None,
    "is_multi_factor_auth_enabled": True,
    "app_data": {"k": 1},
}

SAMPLES: dict[str, dict[str, Any]] = {
    "Meta": {
        "version": "0.1.0",
        "client_id": "client-id-123",
        **{
            f"is_{name}_enabled": False
            for name in (
                "google_login",
                "facebook_login",
                "github_login",
                "linkedin_login",
                "apple_login",
                "discord_login",
                "twitter_login",
                "microsoft_login",
                "twitch_login",
                "roblox_login",
                "email_verification",
                "magic_link_login",
                "sign_up",
                "strong_password",
                "multi_factor_auth",
                "mobile_basic_authentication",
                "phone_verification",
            )
        },
        "is_basic_authentication_enabled": True,
    },
    "AuthResponse": {
        "message": "Logged in successfully",
        "access_token": "header.payload.signature",
        "expires_in": 1800,
        "refresh_token": "refresh",
        "id_token": "header.payload.signature",
        "should_show_email_otp_screen": False,
        "should_show_mobile_otp_screen": False,
        "should_show_totp_screen": False,
        "authenticator_scanner_image": None,
        "authenticator_secret": None,
        "authenticator_recovery_codes": None,
        "user": USER,
    },
    "User": USER,
    "Response": {"message": "ok"},
    "ForgotPasswordResponse": {"message": "sent", "should_show_mobile_otp_screen": False},
    "ValidateJWTTokenResponse": {"is_valid": True, "claims": {"sub": USER["id"], "exp": 1}},
    "ValidateSessionResponse": {"is_valid": True, "user": USER},
}


Seen = list[tuple[str, dict[str, Any], dict[str, Any]]]


def stub_resolvers(seen: Seen) -> dict[str, Any]:
    """A resolver for every public operation returning a sample; admin ones stay unbound."""
    schema = build_schema()
    resolvers: dict[str, Any] = {}
    for root in (schema.query_type, schema.mutation_type):
        assert root is not None
        for name, field in root.fields.items():
            type_ = field.type.of_type if isinstance(field.type, GraphQLNonNull) else field.type
            if not isinstance(type_, GraphQLObjectType):
                continue  # a list (webauthn_credentials): no authorizer-js operation
            if type_.name not in SAMPLES or name.startswith("_") or name.startswith("mobile_"):
                continue

            def make(field_name: str, sample: dict[str, Any]) -> Any:
                async def resolve(_context: Any, args: dict[str, Any]) -> dict[str, Any]:
                    seen.append((field_name, args, sample))
                    return sample

                return resolve

            resolvers[name] = make(name, SAMPLES[type_.name])
    return resolvers


@pytest.mark.parametrize(
    ("name", "document", "variables"), captured_calls(), ids=[c[0] for c in captured_calls()]
)
async def test_authorizer_js_call_runs(name: str, document: str, variables: dict[str, Any]) -> None:
    assert check_operation_limits(parse(document), None, DEFAULT_LIMITS) is None
    seen: Seen = []
    schema = build_schema(stub_resolvers(seen))
    result = await execute_operation(schema, document, variables, None, None)
    assert "errors" not in result, result
    [(field, data)] = result["data"].items()
    [(called, args, sample)] = seen
    assert called == field
    # Every selected field came back with the sample's value, scalars included.
    for key, value in data.items():
        if key == "user":
            assert value == {k: USER[k] for k in value}
        else:
            assert value == sample[key], key
    # The resolver got the client's input as ``params``, coerced but unchanged.
    sent = variables.get("data", variables.get("params"))
    assert args == ({"params": sent} if sent is not None else {}), name
