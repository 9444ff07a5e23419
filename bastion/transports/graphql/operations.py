"""GraphQL root fields -> the service operations of the same meaning.

The names are Authorizer's schema; the operations are the ones REST calls, with the
field's ``params`` (or ``param``) object as the request.
"""

from __future__ import annotations

from bastion.service.requests import ServiceOperation, WireOperation, bind
from bastion.service.runtime import Runtime

__all__ = ["root_operations"]


def root_operations(runtime: Runtime) -> dict[str, WireOperation]:
    """Every root field that has a service operation in this build."""
    return {name: bind(operation) for name, operation in _operations(runtime).items()}


def _operations(runtime: Runtime) -> dict[str, ServiceOperation]:
    service, auth, fga, admin = runtime.service, runtime.auth, runtime.fga, runtime.admin
    passkeys = runtime.passkeys
    hooks, templates, users = admin.webhooks, admin.email_templates, admin.users
    return {
        "meta": service.meta,
        "_admin_login": service.admin_login,
        "_admin_logout": service.admin_logout,
        "_admin_session": service.admin_session,
        "_admin_meta": service.admin_meta,
        # authentication
        "signup": auth.signup,
        "login": auth.login,
        "magic_link_login": auth.magic_link_login,
        "verify_email": auth.verify_email,
        "resend_verify_email": auth.resend_verify_email,
        "verify_otp": auth.verify_otp,
        "resend_otp": auth.resend_otp,
        "email_otp_mfa_setup": auth.email_otp_mfa_setup,
        "sms_otp_mfa_setup": auth.sms_otp_mfa_setup,
        "totp_mfa_setup": auth.totp_mfa_setup,
        "skip_mfa_setup": auth.skip_mfa_setup,
        "lock_mfa": auth.lock_mfa,
        "forgot_password": auth.forgot_password,
        "reset_password": auth.reset_password,
        "logout": auth.logout,
        "profile": auth.profile,
        "update_profile": auth.update_profile,
        "deactivate_account": auth.deactivate_account,
        "session": auth.session,
        "revoke": auth.revoke,
        "validate_jwt_token": auth.validate_jwt_token,
        "validate_session": auth.validate_session,
        # the super-admin surface
        "_users": users.users,
        "_user": users.user,
        "_update_user": users.update_user,
        "_delete_user": users.delete_user,
        "_verification_requests": users.verification_requests,
        "_revoke_access": users.revoke_access,
        "_enable_access": users.enable_access,
        "_invite_members": users.invite_members,
        "_add_webhook": hooks.add_webhook,
        "_update_webhook": hooks.update_webhook,
        "_delete_webhook": hooks.delete_webhook,
        "_webhook": hooks.webhook,
        "_webhooks": hooks.webhooks,
        "_webhook_logs": hooks.webhook_logs,
        "_test_endpoint": hooks.test_endpoint,
        "_add_email_template": templates.add_email_template,
        "_update_email_template": templates.update_email_template,
        "_delete_email_template": templates.delete_email_template,
        "_email_templates": templates.email_templates,
        "_audit_logs": admin.audit.audit_logs,
        # the authorization engine
        "check_permissions": fga.check_permissions,
        "list_permissions": fga.list_permissions,
        "_fga_get_model": fga.get_model,
        "_fga_write_model": fga.write_model,
        "_fga_write_tuples": fga.write_tuples,
        "_fga_delete_tuples": fga.delete_tuples,
        "_fga_read_tuples": fga.read_tuples,
        "_fga_list_users": fga.list_users,
        "_fga_expand": fga.expand,
        "_fga_reset": fga.reset,
        # passkeys
        "webauthn_registration_options": passkeys.webauthn_registration_options,
        "webauthn_registration_verify": passkeys.webauthn_registration_verify,
        "webauthn_login_options": passkeys.webauthn_login_options,
        "webauthn_login_verify": passkeys.webauthn_login_verify,
        "webauthn_credentials": passkeys.webauthn_credentials,
        "webauthn_delete_credential": passkeys.webauthn_delete_credential,
        "webauthn_rename_credential": passkeys.webauthn_rename_credential,
        "_webauthn_credentials": passkeys.admin_webauthn_credentials,
        "_webauthn_delete_credential": passkeys.admin_webauthn_delete_credential,
        # a user's sessions
        "sessions": auth.sessions_of_caller,
        "revoke_session": auth.revoke_session,
        "_user_sessions": admin.sessions.user_sessions,
        "_revoke_user_session": admin.sessions.revoke_user_session,
        "_revoke_all_user_sessions": admin.sessions.revoke_all_user_sessions,
    }
