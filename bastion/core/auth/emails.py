"""Default email subjects and bodies, used when no custom template is stored.

Every interpolated value is HTML-escaped, including the organisation name and logo: a
user's ``given_name`` or a link never becomes markup.
"""

from __future__ import annotations

import dataclasses
import enum
from html import escape

from bastion.core.auth.user import User

__all__ = ["EmailEvent", "RenderedEmail", "render_default_email"]


class EmailEvent(enum.StrEnum):
    """The template events of the reference (§9.2), also the verification identifiers."""

    BASIC_AUTH_SIGNUP = "basic_auth_signup"
    MAGIC_LINK_LOGIN = "magic_link_login"
    UPDATE_EMAIL = "update_email"
    FORGOT_PASSWORD = "forgot_password"
    INVITE_MEMBER = "invite_member"
    VERIFY_OTP = "verify_otp"


_SUBJECTS = {
    EmailEvent.BASIC_AUTH_SIGNUP: "Please verify your email",
    EmailEvent.MAGIC_LINK_LOGIN: "Please verify your email",
    EmailEvent.UPDATE_EMAIL: "Please verify your email",
    EmailEvent.FORGOT_PASSWORD: "Reset Password",
    EmailEvent.INVITE_MEMBER: "Please accept the invitation",
    EmailEvent.VERIFY_OTP: "OTP for your multi factor authentication",
}

_LEADS = {
    EmailEvent.BASIC_AUTH_SIGNUP: "Thanks for signing up. Please confirm your email address.",
    EmailEvent.MAGIC_LINK_LOGIN: "Use the button below to sign in. The link works once.",
    EmailEvent.UPDATE_EMAIL: "Please confirm your new email address.",
    EmailEvent.FORGOT_PASSWORD: "We received a request to reset your password.",
    EmailEvent.INVITE_MEMBER: "You have been invited. Accept the invitation to set up access.",
    EmailEvent.VERIFY_OTP: "Use this one-time code to finish signing in:",
}

_ACTIONS = {
    EmailEvent.BASIC_AUTH_SIGNUP: "Verify email",
    EmailEvent.MAGIC_LINK_LOGIN: "Sign in",
    EmailEvent.UPDATE_EMAIL: "Verify email",
    EmailEvent.FORGOT_PASSWORD: "Reset password",
    EmailEvent.INVITE_MEMBER: "Accept invitation",
}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RenderedEmail:
    subject: str
    html: str


def render_default_email(
    event: EmailEvent,
    *,
    user: User,
    organization_name: str,
    organization_logo: str,
    verification_url: str | None = None,
    otp: str | None = None,
) -> RenderedEmail:
    """The built-in email for ``event``: a link for every event but ``verify_otp``,
    which carries the code instead."""
    if event is EmailEvent.VERIFY_OTP:
        if not otp:
            raise ValueError("verify_otp needs an otp")
        action = f'<p style="font-size:24px;letter-spacing:4px"><b>{escape(otp)}</b></p>'
    else:
        if not verification_url:
            raise ValueError(f"{event} needs a verification_url")
        url = escape(verification_url)
        action = f'<p><a href="{url}">{escape(_ACTIONS[event])}</a></p><p>{url}</p>'
    greeting = escape(user.given_name or user.email or "there")
    org = escape(organization_name)
    html = (
        "<!DOCTYPE html><html><body>"
        f'<img src="{escape(organization_logo)}" alt="{org}" height="48">'
        f"<p>Hi {greeting},</p><p>{escape(_LEADS[event])}</p>{action}"
        f"<p>If you did not ask for this, you can ignore this email.</p><p>{org}</p>"
        "</body></html>"
    )
    return RenderedEmail(subject=_SUBJECTS[event], html=html)
