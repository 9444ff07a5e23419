"""The event names webhooks and email templates may be registered for (reference §9)."""

from __future__ import annotations

from typing import Final

#: The only valid ``event_name`` of a webhook: Authorizer 2.3's events, then bastion's
#: multi-factor, passkey and session ones (named as their audit actions;
#: ``service.auth.mfa_outcomes``, ``service.admin.users``, ``service.auth.session_list``,
#: ``service.admin.user_sessions``).
WEBHOOK_EVENTS: Final[tuple[str, ...]] = (
    "user.login",
    "user.created",
    "user.signup",
    "user.access_revoked",
    "user.access_enabled",
    "user.deleted",
    "user.deactivated",
    "user.mfa_challenge_issued",
    "user.mfa_passed",
    "user.mfa_failed",
    "user.mfa_guesses_exhausted",
    "user.mfa_reset",
    "user.passkey_registered",
    "user.passkey_deleted",
    "user.mfa_enrolled",
    "user.mfa_setup_skipped",
    "user.mfa_locked",
    "user.session_revoked",
    "user.sessions_revoked",
)

#: The mails an admin template can replace, one template per event.
EMAIL_TEMPLATE_EVENTS: Final[tuple[str, ...]] = (
    "basic_auth_signup",
    "magic_link_login",
    "update_email",
    "forgot_password",
    "invite_member",
    "verify_otp",
)


def default_description(event_name: str) -> str:
    """Authorizer's default: the event name with its dots as spaces."""
    return event_name.replace(".", " ")
