"""Every API operation of the spec, and where each surface offers it.

One row per operation: the REST method and path, the GraphQL root field, the gRPC
service and method, and ``grpc_unwrap`` where Authorizer's protobuf response puts REST's
bare body under a field. A new operation is one new row; scenarios name operations by
the REST name (the last path segments, ``admin/`` dropped, as in :data:`OPERATIONS`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    rest_method: str
    rest_path: str
    graphql_field: str
    grpc_service: str
    grpc_method: str
    grpc_unwrap: str | None = None

    @property
    def mutates(self) -> bool:
        """POST is state-changing for CSRF purposes; GET is not."""
        return self.rest_method == "POST"


_PUBLIC = "AuthorizerService"
_ADMIN = "AuthorizerAdminService"


def _public(name: str, rpc: str, method: str = "POST", field: str | None = None) -> Operation:
    return Operation(name, method, f"/v1/{name}", field or name, _PUBLIC, rpc)


def _admin(
    name: str,
    rpc: str,
    method: str = "POST",
    field: str | None = None,
    path: str | None = None,
    unwrap: str | None = None,
) -> Operation:
    return Operation(
        name,
        method,
        path or f"/v1/admin/{name}",
        field or f"_{name}",
        _ADMIN,
        rpc,
        unwrap,
    )


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        _public("meta", "Meta", "GET"),
        _public("signup", "Signup"),
        _public("login", "Login"),
        _public("logout", "Logout"),
        _public("magic_link_login", "MagicLinkLogin"),
        _public("verify_email", "VerifyEmail"),
        _public("resend_verify_email", "ResendVerifyEmail"),
        _public("verify_otp", "VerifyOtp"),
        _public("resend_otp", "ResendOtp"),
        _public("email_otp_mfa_setup", "EmailOtpMfaSetup"),
        _public("sms_otp_mfa_setup", "SmsOtpMfaSetup"),
        _public("totp_mfa_setup", "TotpMfaSetup"),
        _public("skip_mfa_setup", "SkipMfaSetup"),
        _public("lock_mfa", "LockMfa"),
        _public("forgot_password", "ForgotPassword"),
        _public("reset_password", "ResetPassword"),
        _public("profile", "Profile", "GET"),
        _public("update_profile", "UpdateProfile"),
        _public("deactivate_account", "DeactivateAccount"),
        _public("session", "Session"),
        _public("revoke", "Revoke"),
        _public("validate_jwt_token", "ValidateJwtToken"),
        _public("validate_session", "ValidateSession"),
        _public("check_permissions", "CheckPermissions"),
        _public("list_permissions", "ListPermissions"),
        _public("webauthn_registration_options", "WebauthnRegistrationOptions"),
        _public("webauthn_registration_verify", "WebauthnRegistrationVerify"),
        _public("webauthn_login_options", "WebauthnLoginOptions"),
        _public("webauthn_login_verify", "WebauthnLoginVerify"),
        _public("webauthn_credentials", "WebauthnCredentials"),
        _public("webauthn_delete_credential", "WebauthnDeleteCredential"),
        _public("webauthn_rename_credential", "WebauthnRenameCredential"),
        _public("sessions", "Sessions", "GET"),
        _public("revoke_session", "RevokeSession"),
        _admin("admin_login", "AdminLogin", path="/v1/admin/login"),
        _admin("admin_logout", "AdminLogout", path="/v1/admin/logout"),
        _admin("admin_session", "AdminSession", "GET", path="/v1/admin/session"),
        _admin("admin_meta", "AdminMeta", "GET", path="/v1/admin/meta", unwrap="admin_meta"),
        _admin("users", "Users"),
        _admin("user", "User", unwrap="user"),
        _admin("update_user", "UpdateUser", unwrap="user"),
        _admin("delete_user", "DeleteUser"),
        _admin("verification_requests", "VerificationRequests"),
        _admin("revoke_access", "RevokeAccess"),
        _admin("enable_access", "EnableAccess"),
        _admin("invite_members", "InviteMembers"),
        _admin("add_webhook", "AddWebhook"),
        _admin("update_webhook", "UpdateWebhook"),
        _admin("delete_webhook", "DeleteWebhook"),
        _admin("webhook", "GetWebhook", unwrap="webhook"),
        _admin("webhooks", "Webhooks"),
        _admin("webhook_logs", "WebhookLogs"),
        _admin("test_endpoint", "TestEndpoint"),
        _admin("add_email_template", "AddEmailTemplate"),
        _admin("update_email_template", "UpdateEmailTemplate"),
        _admin("delete_email_template", "DeleteEmailTemplate"),
        _admin("email_templates", "EmailTemplates"),
        _admin("audit_logs", "AuditLogs"),
        _admin(
            "webauthn_credentials_of_user",
            "AdminWebauthnCredentials",
            field="_webauthn_credentials",
            path="/v1/admin/webauthn_credentials",
        ),
        _admin(
            "webauthn_delete_credential_of_user",
            "AdminWebauthnDeleteCredential",
            field="_webauthn_delete_credential",
            path="/v1/admin/webauthn_delete_credential",
        ),
        _admin("user_sessions", "AdminUserSessions"),
        _admin("revoke_user_session", "AdminRevokeUserSession"),
        _admin("revoke_all_user_sessions", "AdminRevokeAllUserSessions"),
        _admin("fga_get_model", "FgaGetModel", "GET", path="/v1/admin/fga/model", unwrap="model"),
        _admin("fga_write_model", "FgaWriteModel", path="/v1/admin/fga/model", unwrap="model"),
        _admin("fga_write_tuples", "FgaWriteTuples", path="/v1/admin/fga/tuples"),
        _admin("fga_delete_tuples", "FgaDeleteTuples", path="/v1/admin/fga/tuples/delete"),
        _admin("fga_read_tuples", "FgaReadTuples", path="/v1/admin/fga/tuples/read"),
        _admin("fga_list_users", "FgaListUsers", path="/v1/admin/fga/list_users"),
        _admin("fga_expand", "FgaExpand", path="/v1/admin/fga/expand"),
        _admin("fga_reset", "FgaReset", path="/v1/admin/fga/reset"),
    )
}

#: GraphQL-only operations Authorizer 2.x keeps in its schema and always refuses.
DEPRECATED_GRAPHQL = {
    "_update_env": "deprecated. please configure env via cli args",
    "_admin_signup": "deprecated. please configure admin secret via cli args",
    "_generate_jwt_keys": "deprecated. please configure jwt keys via cli args",
}
