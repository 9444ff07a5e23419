"""The SDL is Authorizer 2.3's: every operation, argument and field its clients use."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphql import (
    GraphQLInputObjectType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    parse,
    validate,
)

from bastion.core.limits import TEXT_LIMITS
from bastion.transports.graphql import DEPRECATED_OPERATIONS, build_schema

AUTHORIZER_JS = Path(__file__).parent / "data" / "authorizer_js_3.0.1_operations.graphql"


def authorizer_js_documents() -> list[str]:
    """One document per non-comment line of the capture, as authorizer-js sent it."""
    documents = [
        line
        for line in AUTHORIZER_JS.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(documents) == 19  # the capture's 19 GraphQL calls
    return documents


@pytest.fixture(scope="module")
def schema() -> GraphQLSchema:
    return build_schema()


@pytest.mark.parametrize("document", authorizer_js_documents())
def test_every_authorizer_js_document_validates(schema: GraphQLSchema, document: str) -> None:
    assert validate(schema, parse(document)) == []


def test_validation_would_catch_a_renamed_input(schema: GraphQLSchema) -> None:
    # authorizer-js 2.x names inputs *Input; had the schema kept those, 3.x would break.
    login = next(d for d in authorizer_js_documents() if "LoginRequest!" in d)
    errors = validate(schema, parse(login.replace("LoginRequest!", "LoginInput!")))
    assert [e.message for e in errors] == [
        "Unknown type 'LoginInput'. Did you mean 'LoginRequest'?"
    ]


QUERIES = {
    "meta": (None, "Meta!"),
    "session": ("SessionQueryRequest", "AuthResponse!"),
    "profile": (None, "User!"),
    "validate_jwt_token": ("ValidateJWTTokenRequest!", "ValidateJWTTokenResponse!"),
    "validate_session": ("ValidateSessionRequest", "ValidateSessionResponse!"),
    "check_permissions": ("CheckPermissionsInput!", "CheckPermissionsResponse!"),
    "list_permissions": ("ListPermissionsInput!", "ListPermissionsResponse!"),
    "_users": ("ListUsersRequest", "Users!"),
    "_user": ("GetUserRequest!", "User!"),
    "_verification_requests": ("PaginationRequest", "VerificationRequests!"),
    "_admin_session": (None, "Response!"),
    "_admin_meta": (None, "AdminMeta!"),
    "_env": (None, "Env!"),
    "_webhook": ("WebhookRequest!", "Webhook!"),
    "_webhooks": ("PaginationRequest", "Webhooks!"),
    "_webhook_logs": ("ListWebhookLogRequest", "WebhookLogs!"),
    "_email_templates": ("PaginationRequest", "EmailTemplates!"),
    "_audit_logs": ("ListAuditLogRequest", "AuditLogs!"),
    "_fga_get_model": (None, "FgaModel!"),
    "_fga_read_tuples": ("FgaReadTuplesInput!", "FgaTuples!"),
    "_fga_list_users": ("FgaListUsersInput!", "FgaListUsersResponse!"),
    "_fga_expand": ("FgaExpandInput!", "FgaExpandResponse!"),
    "webauthn_credentials": (None, "[WebauthnCredentialInfo!]!"),
    "_webauthn_credentials": ("AdminWebauthnCredentialsRequest!", "[WebauthnCredentialInfo!]!"),
    "sessions": (None, "[SessionInfo!]!"),
    "_user_sessions": ("UserSessionsRequest!", "[SessionInfo!]!"),
}

MUTATIONS = {
    "signup": ("SignUpRequest!", "AuthResponse!"),
    "mobile_signup": ("MobileSignUpRequest", "AuthResponse!"),
    "login": ("LoginRequest!", "AuthResponse!"),
    "mobile_login": ("MobileLoginRequest!", "AuthResponse!"),
    "magic_link_login": ("MagicLinkLoginRequest!", "Response!"),
    "logout": (None, "Response!"),
    "update_profile": ("UpdateProfileRequest!", "Response!"),
    "verify_email": ("VerifyEmailRequest!", "AuthResponse!"),
    "resend_verify_email": ("ResendVerifyEmailRequest!", "Response!"),
    "forgot_password": ("ForgotPasswordRequest!", "ForgotPasswordResponse!"),
    "reset_password": ("ResetPasswordRequest!", "Response!"),
    "revoke": ("OAuthRevokeRequest!", "Response!"),
    "verify_otp": ("VerifyOTPRequest!", "AuthResponse!"),
    "resend_otp": ("ResendOTPRequest!", "Response!"),
    # Authorizer's newer MFA enrolment
    "email_otp_mfa_setup": ("OtpMfaSetupRequest", "Response!"),
    "sms_otp_mfa_setup": ("OtpMfaSetupRequest", "Response!"),
    "totp_mfa_setup": ("OtpMfaSetupRequest", "AuthResponse!"),
    "skip_mfa_setup": ("SkipMfaSetupRequest!", "AuthResponse!"),
    "lock_mfa": ("LockMfaRequest!", "Response!"),
    "deactivate_account": (None, "Response!"),
    "_delete_user": ("DeleteUserRequest!", "Response!"),
    "_update_user": ("UpdateUserRequest!", "User!"),
    "_admin_signup": ("AdminSignupRequest!", "Response!"),
    "_admin_login": ("AdminLoginRequest!", "Response!"),
    "_admin_logout": (None, "Response!"),
    "_update_env": ("UpdateEnvRequest!", "Response!"),
    "_invite_members": ("InviteMemberRequest!", "InviteMembersResponse!"),
    "_revoke_access": ("UpdateAccessRequest!", "Response!"),
    "_enable_access": ("UpdateAccessRequest!", "Response!"),
    "_generate_jwt_keys": ("GenerateJWTKeysRequest!", "GenerateJWTKeysResponse!"),
    "_add_webhook": ("AddWebhookRequest!", "Response!"),
    "_update_webhook": ("UpdateWebhookRequest!", "Response!"),
    "_delete_webhook": ("WebhookRequest!", "Response!"),
    "_test_endpoint": ("TestEndpointRequest!", "TestEndpointResponse!"),
    "_add_email_template": ("AddEmailTemplateRequest!", "Response!"),
    "_update_email_template": ("UpdateEmailTemplateRequest!", "Response!"),
    "_delete_email_template": ("DeleteEmailTemplateRequest!", "Response!"),
    "_fga_write_model": ("FgaWriteModelInput!", "FgaModel!"),
    "_fga_write_tuples": ("FgaWriteTuplesInput!", "Response!"),
    "_fga_delete_tuples": ("FgaWriteTuplesInput!", "Response!"),
    "_fga_reset": (None, "Response!"),
    "webauthn_registration_options": (
        "email: String, phone_number: String",
        "WebauthnRegistrationOptionsResponse!",
    ),
    "webauthn_registration_verify": ("WebauthnRegistrationVerifyRequest!", "AuthResponse!"),
    "webauthn_login_options": ("email: String", "WebauthnLoginOptionsResponse!"),
    "webauthn_login_verify": ("WebauthnLoginVerifyRequest!", "AuthResponse!"),
    "webauthn_delete_credential": ("id: ID!", "Response!"),
    "webauthn_rename_credential": ("WebauthnRenameCredentialRequest!", "Response!"),
    "_webauthn_delete_credential": ("AdminWebauthnDeleteCredentialRequest!", "Response!"),
    "revoke_session": ("id: ID!", "Response!"),
    "_revoke_user_session": ("RevokeUserSessionRequest!", "Response!"),
    "_revoke_all_user_sessions": ("UserSessionsRequest!", "Response!"),
}

#: Authorizer 2.4's passkey fields take plain arguments, not one ``params`` object.
FLAT_ARGUMENTS = {
    "webauthn_registration_options",
    "webauthn_login_options",
    "webauthn_delete_credential",
    "revoke_session",
}


def _signature(root: GraphQLObjectType) -> dict[str, tuple[str | None, str]]:
    signature: dict[str, tuple[str | None, str]] = {}
    for name, field in root.fields.items():
        args = list(field.args.items())
        if name in FLAT_ARGUMENTS:
            plain = ", ".join(f"{arg}: {value.type}" for arg, value in args)
            signature[name] = (plain, str(field.type))
            continue
        assert len(args) <= 1, name
        expected_arg = "param" if name in ("_revoke_access", "_enable_access") else "params"
        if args:
            assert args[0][0] == expected_arg, name
        signature[name] = (str(args[0][1].type) if args else None, str(field.type))
    return signature


def test_queries_are_authorizers(schema: GraphQLSchema) -> None:
    assert schema.query_type is not None
    assert _signature(schema.query_type) == QUERIES


def test_mutations_are_authorizers(schema: GraphQLSchema) -> None:
    assert schema.mutation_type is not None
    assert _signature(schema.mutation_type) == MUTATIONS
    assert schema.subscription_type is None


def test_package_exports_resolve() -> None:
    import bastion.transports.graphql as package

    assert package.__all__
    for name in package.__all__:
        assert hasattr(package, name), name


def test_deprecated_operations_are_in_the_schema() -> None:
    assert set(DEPRECATED_OPERATIONS) <= set(QUERIES) | set(MUTATIONS)


def test_custom_scalars_are_declared(schema: GraphQLSchema) -> None:
    for name in ("Int64", "Map", "Any"):
        assert isinstance(schema.type_map[name], GraphQLScalarType)


def _fields(schema: GraphQLSchema, type_name: str) -> dict[str, str]:
    type_ = schema.type_map[type_name]
    assert isinstance(type_, GraphQLObjectType | GraphQLInputObjectType)
    return {name: str(field.type) for name, field in type_.fields.items()}


@pytest.mark.parametrize(
    ("type_name", "expected"),
    [
        (
            "User",
            {
                "id": "ID!",
                "email": "String",
                "email_verified": "Boolean!",
                "signup_methods": "String!",
                "given_name": "String",
                "family_name": "String",
                "middle_name": "String",
                "nickname": "String",
                "preferred_username": "String",
                "gender": "String",
                "birthdate": "String",
                "phone_number": "String",
                "phone_number_verified": "Boolean!",
                "picture": "String",
                "roles": "[String!]!",
                "created_at": "Int64",
                "updated_at": "Int64",
                "revoked_timestamp": "Int64",
                "is_multi_factor_auth_enabled": "Boolean",
                "app_data": "Map",
                # Authorizer's newer schema (authorizer-py 0.3.0)
                "has_skipped_mfa_setup_at": "Int64",
                "mfa_locked_at": "Int64",
                "enrolled_mfa_methods": "[String!]",
            },
        ),
        (
            "AuthResponse",
            {
                "message": "String!",
                "should_show_email_otp_screen": "Boolean",
                "should_show_mobile_otp_screen": "Boolean",
                "should_show_totp_screen": "Boolean",
                "access_token": "String",
                "id_token": "String",
                "refresh_token": "String",
                "expires_in": "Int64",
                "user": "User",
                "authenticator_scanner_image": "String",
                "authenticator_secret": "String",
                "authenticator_recovery_codes": "[String]",
                "should_offer_webauthn_mfa_verify": "Boolean",
                "should_offer_webauthn_mfa_setup": "Boolean",
                "should_offer_email_otp_mfa_setup": "Boolean",
                "should_offer_sms_otp_mfa_setup": "Boolean",
            },
        ),
        ("InviteMembersResponse", {"message": "String!", "Users": "[User!]!"}),
        (
            "Pagination",
            {"limit": "Int64!", "page": "Int64!", "offset": "Int64!", "total": "Int64!"},
        ),
        ("ValidateJWTTokenResponse", {"is_valid": "Boolean!", "claims": "Map"}),
        ("ValidateSessionResponse", {"is_valid": "Boolean!", "user": "User!"}),
        (
            "AdminMeta",
            {
                "roles": "[String!]!",
                "default_roles": "[String!]!",
                "protected_roles": "[String!]!",
                "is_multi_factor_auth_service_enabled": "Boolean",
            },
        ),
        (
            "ListPermissionsResponse",
            {"objects": "[String!]!", "permissions": "[Permission!]!", "truncated": "Boolean!"},
        ),
        ("FgaTuples", {"tuples": "[FgaTuple!]!", "continuation_token": "String"}),
        (
            "PermissionCheckResult",
            {
                "relation": "String!",
                "object": "String!",
                "allowed": "Boolean!",
                "error": "PermissionCheckError",
            },
        ),
        ("FgaExpandResponse", {"tree": "String!"}),
        (
            "ForgotPasswordResponse",
            {"message": "String!", "should_show_mobile_otp_screen": "Boolean"},
        ),
        ("TestEndpointResponse", {"http_status": "Int64", "response": "String"}),
        (
            "SessionQueryRequest",
            {
                "roles": "[String!]",
                "scope": "[String!]",
                "state": "String",
                "required_relations": "[FgaRelationInput!]",
            },
        ),
        (
            "ValidateJWTTokenRequest",
            {
                "token_type": "String!",
                "token": "String!",
                "roles": "[String!]",
                "required_relations": "[FgaRelationInput!]",
            },
        ),
        (
            "ValidateSessionRequest",
            {
                "cookie": "String!",
                "roles": "[String!]",
                "required_relations": "[FgaRelationInput!]",
            },
        ),
        (
            "CheckPermissionsInput",
            {"checks": "[PermissionCheckInput!]!", "user": "String"},
        ),
        (
            "PermissionCheckInput",
            {
                "relation": "String!",
                "object": "String!",
                "contextual_tuples": "[FgaTupleInput!]",
                "context": "Map",
            },
        ),
        (
            "ListAuditLogRequest",
            {
                "pagination": "PaginationRequest",
                "action": "String",
                "actor_id": "String",
                "resource_type": "String",
                "resource_id": "String",
                "from_timestamp": "Int64",
                "to_timestamp": "Int64",
                "resource": "String",  # the spec's name, beside Authorizer's two
            },
        ),
        ("DeleteUserRequest", {"email": "String", "id": "String"}),
        ("UpdateAccessRequest", {"user_id": "String!"}),
        (
            "FgaListUsersInput",
            {
                "object": "String!",
                "relation": "String!",
                "user_type": "String!",
                "context": "Map",
                "contextual_tuples": "[FgaTupleInput!]",
            },
        ),
    ],
)
def test_type_fields_and_nullability(
    schema: GraphQLSchema, type_name: str, expected: dict[str, str]
) -> None:
    assert _fields(schema, type_name) == expected


def test_env_keeps_its_v1_shape(schema: GraphQLSchema) -> None:
    env = _fields(schema, "Env")
    assert len(env) == 71
    assert env["CLIENT_ID"] == "String!"
    assert env["DISABLE_TOTP_LOGIN"] == "Boolean!"
    assert "OLD_ADMIN_SECRET" in _fields(schema, "UpdateEnvRequest")


def test_every_list_of_objects_holds_non_null_objects(schema: GraphQLSchema) -> None:
    # Authorizer declares every list of objects as [X!]!; a nullable item would change
    # what a failing item does to its list.
    checked = 0
    for type_ in schema.type_map.values():
        if not isinstance(type_, GraphQLObjectType) or type_.name.startswith("__"):
            continue
        for name, field in type_.fields.items():
            if not isinstance(field.type, GraphQLNonNull | GraphQLList):
                continue
            outer = field.type.of_type if isinstance(field.type, GraphQLNonNull) else field.type
            if not isinstance(outer, GraphQLList):
                continue
            item = outer.of_type
            base = item.of_type if isinstance(item, GraphQLNonNull) else item
            if isinstance(base, GraphQLObjectType):
                assert isinstance(field.type, GraphQLNonNull), f"{type_.name}.{name}"
                assert isinstance(item, GraphQLNonNull), f"{type_.name}.{name}"
                checked += 1
    assert checked == 14  # with the passkey lists and the sessions (the user's, the admin's)


def test_text_inputs_document_their_declared_limits(schema: GraphQLSchema) -> None:
    signup = schema.get_type("SignUpRequest")
    assert isinstance(signup, GraphQLInputObjectType)
    limit = TEXT_LIMITS["given_name"]
    assert signup.fields["given_name"].description == f"At most {limit} characters."
    roles = TEXT_LIMITS["roles"]
    assert signup.fields["roles"].description == f"Each item at most {roles} characters."
