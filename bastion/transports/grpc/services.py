"""``authorizer.v1`` services on grpcio, bound to the one service layer.

Every RPC is one row of :data:`_RPCS`: which service operation it calls, which response
message it renders, and, where Authorizer's protobuf wraps what REST returns bare, the
field the body goes into. A request message becomes the same request mapping REST
builds from JSON (proto field names are REST's snake_case names), so both surfaces
validate and answer alike. An RPC with no row answers UNIMPLEMENTED.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import SimpleCookie

import grpc
import trio
from google.protobuf import json_format
from google.protobuf.message import Message

from bastion.core import errors, input_rules
from bastion.core.networks import client_ip
from bastion.service import tracing
from bastion.service.context import CallerContext, Cookie, Protocol, Reply
from bastion.service.requests import WireOperation, bind
from bastion.service.runtime import Runtime
from bastion.transports.grpc.admin_shapes import renamed, unwrapped, wrapped
from bastion.transports.grpc.auth_shapes import grpc_shaped
from bastion.transports.grpc.bridge import CallCancelled, run_for_call
from bastion.transports.grpc.messages import to_message
from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
    types_pb2,
)

log = logging.getLogger("bastion.grpc")


#: The gRPC surface's one table from error class to status code.
GRPC_STATUS: dict[type[errors.BastionError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.PayloadTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unimplemented: grpc.StatusCode.UNIMPLEMENTED,
    errors.MethodNotAllowed: grpc.StatusCode.UNIMPLEMENTED,
    errors.Internal: grpc.StatusCode.INTERNAL,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
}


def grpc_status(error: errors.BastionError) -> grpc.StatusCode:
    for cls in type(error).__mro__:
        if cls in GRPC_STATUS:
            return GRPC_STATUS[cls]
    return grpc.StatusCode.INTERNAL


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


def _peer_address(peer: str) -> str:
    """``ipv4:1.2.3.4:5678`` / ``ipv6:[::1]:5678`` -> the address alone."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return peer


def _caller(runtime: Runtime, context: grpc.ServicerContext) -> CallerContext:
    metadata = {key.lower(): value for key, value in context.invocation_metadata()}
    auth = str(metadata.get("authorization", ""))
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else None
    jar: SimpleCookie = SimpleCookie()
    if "cookie" in metadata:
        try:
            jar.load(str(metadata["cookie"]))
        except Exception:  # a malformed cookie header carries no credentials
            jar = SimpleCookie()
    return CallerContext(
        protocol=Protocol.GRPC,
        client_ip=client_ip(
            _peer_address(context.peer()),
            # gRPC's core keeps one value of this key (the last line): a list of one
            [str(metadata["x-forwarded-for"])] if "x-forwarded-for" in metadata else [],
            runtime.trusted_proxies,
        ),
        user_agent=str(metadata.get("user-agent", "")),
        bearer_token=bearer or None,
        cookies={name: morsel.value for name, morsel in jar.items()},
        admin_secret_header=metadata.get("x-service-admin-secret")
        or metadata.get("x-authorizer-admin-secret"),
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


def _handler(
    runtime: Runtime, token: trio.lowlevel.TrioToken, rpc: _Rpc, method: str
) -> Callable[[Message, grpc.ServicerContext], Message]:
    """``method`` is the RPC's full name (``authorizer.v1.AuthorizerService/Login``)."""
    operation = rpc.operation(runtime)
    facts = {"rpc.system": "grpc", "rpc.method": method}

    def handle(request: Message, context: grpc.ServicerContext) -> Message:
        caller = _caller(runtime, context)
        body = json_format.MessageToDict(request, preserving_proto_field_name=True)
        if (why := input_rules.refusal(body, "request")) is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, why)
        trace = _trace_headers(context) if tracing.enabled() else {}

        async def call() -> Reply:
            with tracing.request_span(
                method, trace.get("traceparent"), trace.get("tracestate"), facts
            ):
                await runtime.rate_limiter.check(caller.client_ip, surface="grpc")
                return await operation(body, caller)

        try:
            reply = run_for_call(token, context, call)
        except CallCancelled:
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
        except errors.BastionError as error:
            if isinstance(error, errors.ResourceExhausted):
                trailers = [("retry-after", str(error.retry_after))]
                if error.before_effect:
                    trailers.append((errors.BEFORE_EFFECT_MARK, errors.BEFORE_EFFECT_VALUE))
                context.set_trailing_metadata(tuple(trailers))
            context.abort(grpc_status(error), error.message)
        except Exception:
            log.exception("unhandled error", extra={"method": type(request).__name__})
            context.abort(grpc.StatusCode.INTERNAL, "internal server error")
        if reply.cookies:
            context.send_initial_metadata(
                tuple(("set-cookie", _set_cookie_header(c)) for c in reply.cookies)
            )
        payload = {rpc.wrap_in: reply.body} if rpc.wrap_in else reply.body
        return to_message(payload, rpc.response)

    return handle


def _trace_headers(context: grpc.ServicerContext) -> dict[str, str]:
    """The caller's W3C trace context from its metadata."""
    return {
        key: str(value)
        for key, value in context.invocation_metadata()
        if key in ("traceparent", "tracestate")
    }


def _servicer(
    base: type,
    service: str,
    rpcs: dict[str, _Rpc],
    runtime: Runtime,
    token: trio.lowlevel.TrioToken,
) -> object:
    methods = {
        name: staticmethod(_handler(runtime, token, rpc, f"{service}/{name}"))
        for name, rpc in rpcs.items()
    }
    return type(f"Bastion{base.__name__}", (base,), methods)()


def registrations(
    runtime: Runtime, token: trio.lowlevel.TrioToken
) -> list[Callable[[grpc.Server], str]]:
    """Adders for :class:`~transports.grpc.server.GrpcListener`; each returns its full name."""

    def public(server: grpc.Server) -> str:
        authorizer_pb2_grpc.add_AuthorizerServiceServicer_to_server(
            _servicer(
                authorizer_pb2_grpc.AuthorizerServiceServicer,
                "authorizer.v1.AuthorizerService",
                _RPCS["AuthorizerService"],
                runtime,
                token,
            ),
            server,
        )
        return "authorizer.v1.AuthorizerService"

    def admin(server: grpc.Server) -> str:
        admin_pb2_grpc.add_AuthorizerAdminServiceServicer_to_server(
            _servicer(
                admin_pb2_grpc.AuthorizerAdminServiceServicer,
                "authorizer.v1.AuthorizerAdminService",
                _RPCS["AuthorizerAdminService"],
                runtime,
                token,
            ),
            server,
        )
        return "authorizer.v1.AuthorizerAdminService"

    return [public, admin]
