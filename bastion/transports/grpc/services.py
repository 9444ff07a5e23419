"""``authorizer.v1`` services, bound to the one service layer.

Every RPC is one row of :data:`_RPCS`: which service operation it calls, which response
message it renders, and, where Authorizer's protobuf wraps what REST returns bare, the
field the body goes into. A request message becomes the same request mapping REST
builds from JSON (proto field names are REST's snake_case names), so both surfaces
validate and answer alike. An RPC with no row answers UNIMPLEMENTED.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie

from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message

from bastion.core import errors, input_rules
from bastion.core.networks import client_ip
from bastion.service import tracing
from bastion.service.context import CallerContext, Cookie, Protocol
from bastion.service.requests import WireOperation, bind
from bastion.service.runtime import Runtime
from bastion.transports.grpc.admin_shapes import renamed, unwrapped, wrapped
from bastion.transports.grpc.auth_shapes import grpc_shaped
from bastion.transports.grpc.calls import Abort, Call, Method, Status
from bastion.transports.grpc.messages import to_message
from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, authorizer_pb2, types_pb2

log = logging.getLogger("bastion.grpc")


#: The gRPC surface's one table from error class to status code.
GRPC_STATUS: dict[type[errors.BastionError], Status] = {
    errors.InvalidArgument: Status.INVALID_ARGUMENT,
    errors.Unauthenticated: Status.UNAUTHENTICATED,
    errors.PermissionDenied: Status.PERMISSION_DENIED,
    errors.NotFound: Status.NOT_FOUND,
    errors.AlreadyExists: Status.ALREADY_EXISTS,
    errors.FailedPrecondition: Status.FAILED_PRECONDITION,
    errors.ResourceExhausted: Status.RESOURCE_EXHAUSTED,
    errors.PayloadTooLarge: Status.RESOURCE_EXHAUSTED,
    errors.Unimplemented: Status.UNIMPLEMENTED,
    errors.MethodNotAllowed: Status.UNIMPLEMENTED,
    errors.Internal: Status.INTERNAL,
    errors.Unavailable: Status.UNAVAILABLE,
    errors.DeadlineExceeded: Status.DEADLINE_EXCEEDED,
}


def grpc_status(error: errors.BastionError) -> Status:
    for cls in type(error).__mro__:
        if cls in GRPC_STATUS:
            return GRPC_STATUS[cls]
    return Status.INTERNAL


@dataclass(frozen=True, slots=True)
class _Rpc:
    operation: Callable[[Runtime], WireOperation]
    response: type[Message]
    #: Authorizer's message puts REST's bare body under this field.
    wrap_in: str | None = None


_RPCS: dict[str, dict[str, _Rpc]] = {
    "AuthorizerService": {
        "Meta": _Rpc(lambda r: bind(r.service.meta), types_pb2.Meta),
        "CheckPermissions": _Rpc(
            lambda r: bind(r.fga.check_permissions), authorizer_pb2.CheckPermissionsResponse
        ),
        "ListPermissions": _Rpc(
            lambda r: bind(r.fga.list_permissions), authorizer_pb2.ListPermissionsResponse
        ),
        "Signup": _Rpc(lambda r: grpc_shaped(bind(r.auth.signup)), types_pb2.AuthResponse),
        "Login": _Rpc(lambda r: grpc_shaped(bind(r.auth.login)), types_pb2.AuthResponse),
        "Logout": _Rpc(lambda r: grpc_shaped(bind(r.auth.logout)), authorizer_pb2.LogoutResponse),
        "MagicLinkLogin": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.magic_link_login)),
            authorizer_pb2.MagicLinkLoginResponse,
        ),
        "VerifyEmail": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.verify_email)), types_pb2.AuthResponse
        ),
        "ResendVerifyEmail": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.resend_verify_email)),
            authorizer_pb2.ResendVerifyEmailResponse,
        ),
        "VerifyOtp": _Rpc(lambda r: grpc_shaped(bind(r.auth.verify_otp)), types_pb2.AuthResponse),
        "ResendOtp": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.resend_otp)), authorizer_pb2.ResendOtpResponse
        ),
        "ForgotPassword": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.forgot_password)),
            authorizer_pb2.ForgotPasswordResponse,
        ),
        "ResetPassword": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.reset_password)), authorizer_pb2.ResetPasswordResponse
        ),
        "Profile": _Rpc(lambda r: grpc_shaped(bind(r.auth.profile)), types_pb2.User),
        "UpdateProfile": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.update_profile)), authorizer_pb2.UpdateProfileResponse
        ),
        "DeactivateAccount": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.deactivate_account)),
            authorizer_pb2.DeactivateAccountResponse,
        ),
        "Revoke": _Rpc(lambda r: grpc_shaped(bind(r.auth.revoke)), authorizer_pb2.RevokeResponse),
        "Session": _Rpc(lambda r: grpc_shaped(bind(r.auth.session)), types_pb2.AuthResponse),
        "ValidateJwtToken": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.validate_jwt_token)),
            authorizer_pb2.ValidateJwtTokenResponse,
        ),
        "ValidateSession": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.validate_session)),
            authorizer_pb2.ValidateSessionResponse,
        ),
        "WebauthnRegistrationOptions": _Rpc(
            lambda r: bind(r.passkeys.webauthn_registration_options),
            authorizer_pb2.WebauthnRegistrationOptionsResponse,
        ),
        "WebauthnRegistrationVerify": _Rpc(
            lambda r: grpc_shaped(bind(r.passkeys.webauthn_registration_verify)),
            types_pb2.AuthResponse,
        ),
        "WebauthnLoginOptions": _Rpc(
            lambda r: bind(r.passkeys.webauthn_login_options),
            authorizer_pb2.WebauthnLoginOptionsResponse,
        ),
        "WebauthnLoginVerify": _Rpc(
            lambda r: grpc_shaped(bind(r.passkeys.webauthn_login_verify)),
            types_pb2.AuthResponse,
        ),
        "WebauthnCredentials": _Rpc(
            lambda r: bind(r.passkeys.webauthn_credentials),
            authorizer_pb2.WebauthnCredentialsResponse,
        ),
        "WebauthnDeleteCredential": _Rpc(
            lambda r: bind(r.passkeys.webauthn_delete_credential),
            authorizer_pb2.WebauthnDeleteCredentialResponse,
        ),
        "WebauthnRenameCredential": _Rpc(
            lambda r: bind(r.passkeys.webauthn_rename_credential),
            authorizer_pb2.WebauthnRenameCredentialResponse,
        ),
        "Sessions": _Rpc(
            lambda r: bind(r.auth.sessions_of_caller), authorizer_pb2.SessionsResponse
        ),
        "RevokeSession": _Rpc(
            lambda r: bind(r.auth.revoke_session), authorizer_pb2.RevokeSessionResponse
        ),
        "SkipMfaSetup": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.skip_mfa_setup)), types_pb2.AuthResponse
        ),
        "LockMfa": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.lock_mfa)), authorizer_pb2.LockMfaResponse
        ),
        "EmailOtpMfaSetup": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.email_otp_mfa_setup)),
            authorizer_pb2.EmailOtpMfaSetupResponse,
        ),
        "SmsOtpMfaSetup": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.sms_otp_mfa_setup)),
            authorizer_pb2.SmsOtpMfaSetupResponse,
        ),
        "TotpMfaSetup": _Rpc(
            lambda r: grpc_shaped(bind(r.auth.totp_mfa_setup)), types_pb2.AuthResponse
        ),
    },
    "AuthorizerAdminService": {
        "AdminWebauthnCredentials": _Rpc(
            lambda r: bind(r.passkeys.admin_webauthn_credentials),
            admin_pb2.AdminWebauthnCredentialsResponse,
        ),
        "AdminWebauthnDeleteCredential": _Rpc(
            lambda r: bind(r.passkeys.admin_webauthn_delete_credential),
            admin_pb2.AdminWebauthnDeleteCredentialResponse,
        ),
        "AdminUserSessions": _Rpc(
            lambda r: bind(r.admin.sessions.user_sessions), admin_pb2.AdminUserSessionsResponse
        ),
        "AdminRevokeUserSession": _Rpc(
            lambda r: bind(r.admin.sessions.revoke_user_session),
            admin_pb2.AdminRevokeUserSessionResponse,
        ),
        "AdminRevokeAllUserSessions": _Rpc(
            lambda r: bind(r.admin.sessions.revoke_all_user_sessions),
            admin_pb2.AdminRevokeAllUserSessionsResponse,
        ),
        "AdminLogin": _Rpc(lambda r: bind(r.service.admin_login), admin_pb2.AdminLoginResponse),
        "AdminLogout": _Rpc(lambda r: bind(r.service.admin_logout), admin_pb2.AdminLogoutResponse),
        "AdminSession": _Rpc(
            lambda r: bind(r.service.admin_session), admin_pb2.AdminSessionResponse
        ),
        "AdminMeta": _Rpc(
            lambda r: bind(r.service.admin_meta), admin_pb2.AdminMetaResponse, wrap_in="admin_meta"
        ),
        "FgaGetModel": _Rpc(
            lambda r: bind(r.fga.get_model), admin_pb2.FgaGetModelResponse, wrap_in="model"
        ),
        "FgaWriteModel": _Rpc(
            lambda r: bind(r.fga.write_model), admin_pb2.FgaWriteModelResponse, wrap_in="model"
        ),
        "FgaWriteTuples": _Rpc(
            lambda r: bind(r.fga.write_tuples), admin_pb2.FgaWriteTuplesResponse
        ),
        "FgaDeleteTuples": _Rpc(
            lambda r: bind(r.fga.delete_tuples), admin_pb2.FgaDeleteTuplesResponse
        ),
        "FgaReadTuples": _Rpc(lambda r: bind(r.fga.read_tuples), admin_pb2.FgaReadTuplesResponse),
        "FgaListUsers": _Rpc(lambda r: bind(r.fga.list_users), admin_pb2.FgaListUsersResponse),
        "FgaExpand": _Rpc(lambda r: bind(r.fga.expand), admin_pb2.FgaExpandResponse),
        "FgaReset": _Rpc(lambda r: bind(r.fga.reset), admin_pb2.FgaResetResponse),
        "AddWebhook": _Rpc(
            lambda r: unwrapped(bind(r.admin.webhooks.add_webhook), "headers"),
            admin_pb2.AddWebhookResponse,
        ),
        "UpdateWebhook": _Rpc(
            lambda r: unwrapped(bind(r.admin.webhooks.update_webhook), "headers"),
            admin_pb2.UpdateWebhookResponse,
        ),
        "DeleteWebhook": _Rpc(
            lambda r: bind(r.admin.webhooks.delete_webhook), admin_pb2.DeleteWebhookResponse
        ),
        "GetWebhook": _Rpc(
            lambda r: wrapped(bind(r.admin.webhooks.webhook), "headers"),
            admin_pb2.GetWebhookResponse,
            wrap_in="webhook",
        ),
        "Webhooks": _Rpc(
            lambda r: wrapped(bind(r.admin.webhooks.webhooks), "headers", within="webhooks"),
            admin_pb2.WebhooksResponse,
        ),
        "WebhookLogs": _Rpc(
            lambda r: bind(r.admin.webhooks.webhook_logs), admin_pb2.WebhookLogsResponse
        ),
        "TestEndpoint": _Rpc(
            lambda r: unwrapped(bind(r.admin.webhooks.test_endpoint), "headers"),
            admin_pb2.TestEndpointResponse,
        ),
        "AddEmailTemplate": _Rpc(
            lambda r: bind(r.admin.email_templates.add_email_template),
            admin_pb2.AddEmailTemplateResponse,
        ),
        "UpdateEmailTemplate": _Rpc(
            lambda r: bind(r.admin.email_templates.update_email_template),
            admin_pb2.UpdateEmailTemplateResponse,
        ),
        "DeleteEmailTemplate": _Rpc(
            lambda r: bind(r.admin.email_templates.delete_email_template),
            admin_pb2.DeleteEmailTemplateResponse,
        ),
        "EmailTemplates": _Rpc(
            lambda r: bind(r.admin.email_templates.email_templates),
            admin_pb2.EmailTemplatesResponse,
        ),
        "AuditLogs": _Rpc(lambda r: bind(r.admin.audit.audit_logs), admin_pb2.AuditLogsResponse),
        "Users": _Rpc(
            lambda r: wrapped(bind(r.admin.users.users), "app_data", within="users"),
            admin_pb2.UsersResponse,
        ),
        "User": _Rpc(
            lambda r: wrapped(bind(r.admin.users.user), "app_data"),
            admin_pb2.UserResponse,
            wrap_in="user",
        ),
        "UpdateUser": _Rpc(
            lambda r: wrapped(unwrapped(bind(r.admin.users.update_user), "app_data"), "app_data"),
            admin_pb2.UpdateUserResponse,
            wrap_in="user",
        ),
        "DeleteUser": _Rpc(lambda r: bind(r.admin.users.delete_user), admin_pb2.DeleteUserResponse),
        "VerificationRequests": _Rpc(
            lambda r: bind(r.admin.users.verification_requests),
            admin_pb2.VerificationRequestsResponse,
        ),
        "RevokeAccess": _Rpc(
            lambda r: bind(r.admin.users.revoke_access), admin_pb2.RevokeAccessResponse
        ),
        "EnableAccess": _Rpc(
            lambda r: bind(r.admin.users.enable_access), admin_pb2.EnableAccessResponse
        ),
        "InviteMembers": _Rpc(
            lambda r: wrapped(
                renamed(bind(r.admin.users.invite_members), "Users", "users"),
                "app_data",
                within="users",
            ),
            admin_pb2.InviteMembersResponse,
        ),
    },
}


def _caller(runtime: Runtime, call: Call) -> CallerContext:
    metadata = call.metadata
    auth = str(metadata.get("authorization", ""))
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
    jar: SimpleCookie = SimpleCookie()
    if "cookie" in metadata:
        try:
            jar.load(str(metadata["cookie"]))
        except Exception:  # a malformed cookie header carries no credentials
            jar = SimpleCookie()
    admin_secret = metadata.get("x-service-admin-secret") or metadata.get(
        "x-authorizer-admin-secret"
    )
    return CallerContext(
        protocol=Protocol.GRPC,
        client_ip=client_ip(
            call.peer,
            # One value of this key (the last line): a list of one
            [str(metadata["x-forwarded-for"])] if "x-forwarded-for" in metadata else [],
            runtime.trusted_proxies,
        ),
        user_agent=str(metadata.get("user-agent", "")),
        bearer_token=bearer or None,
        cookies={name: morsel.value for name, morsel in jar.items()},
        admin_secret_header=None if admin_secret is None else str(admin_secret),
    )


def _set_cookie_header(cookie: Cookie) -> str:
    parts = [f"{cookie.name}={cookie.value}", f"Path={cookie.path}", f"Max-Age={cookie.max_age}"]
    if cookie.domain:
        parts.append(f"Domain={cookie.domain}")
    if cookie.http_only:
        parts.append("HttpOnly")
    if cookie.secure:
        parts.append("Secure")
    parts.append(f"SameSite={cookie.same_site}")
    return "; ".join(parts)


def _handler(runtime: Runtime, rpc: _Rpc, method: str) -> Callable[..., Awaitable[Message]]:
    """``method`` is the RPC's full name (``authorizer.v1.AuthorizerService/Login``)."""
    operation = rpc.operation(runtime)
    facts = {"rpc.system": "grpc", "rpc.method": method}

    async def handle(request: Message, call: Call) -> Message:
        caller = _caller(runtime, call)
        body = json_format.MessageToDict(request, preserving_proto_field_name=True)
        if (why := input_rules.refusal(body, "request")) is not None:
            raise Abort(Status.INVALID_ARGUMENT, why)
        metadata = call.metadata
        try:
            with tracing.request_span(
                method,
                _text(metadata.get("traceparent")),
                _text(metadata.get("tracestate")),
                facts,
            ):
                await runtime.rate_limiter.check(caller.client_ip, surface="grpc")
                reply = await operation(body, caller)
        except errors.BastionError as error:
            trailers: tuple[tuple[str, str | bytes], ...] = ()
            if isinstance(error, errors.ResourceExhausted):
                trailers = (("retry-after", str(error.retry_after)),)
                if error.before_effect:
                    trailers += ((errors.BEFORE_EFFECT_MARK, errors.BEFORE_EFFECT_VALUE),)
            raise Abort(grpc_status(error), error.message, trailers) from None
        except Exception:
            log.exception("unhandled error", extra={"method": type(request).__name__})
            raise Abort(Status.INTERNAL, "internal server error") from None
        if reply.cookies:
            call.initial_metadata = tuple(
                ("set-cookie", _set_cookie_header(c)) for c in reply.cookies
            )
        payload = {rpc.wrap_in: reply.body} if rpc.wrap_in else reply.body
        return to_message(payload, rpc.response)

    return handle


def _text(value: str | bytes | None) -> str | None:
    return value if value is None or isinstance(value, str) else None


def _methods(
    runtime: Runtime, service: ServiceDescriptor, rpcs: dict[str, _Rpc]
) -> dict[str, Method]:
    methods = {}
    for name, rpc in rpcs.items():
        request = message_factory.GetMessageClass(service.methods_by_name[name].input_type)
        handle = _handler(runtime, rpc, f"{service.full_name}/{name}")
        methods[name] = Method(request.FromString, unary=handle)
    return methods


def services(runtime: Runtime) -> dict[str, dict[str, Method]]:
    """The ``authorizer.v1`` services' methods for :class:`~transports.grpc.server.GrpcListener`,
    by name under each service's full name."""
    public = authorizer_pb2.DESCRIPTOR.services_by_name["AuthorizerService"]
    admin = admin_pb2.DESCRIPTOR.services_by_name["AuthorizerAdminService"]
    return {
        public.full_name: _methods(runtime, public, _RPCS["AuthorizerService"]),
        admin.full_name: _methods(runtime, admin, _RPCS["AuthorizerAdminService"]),
    }
