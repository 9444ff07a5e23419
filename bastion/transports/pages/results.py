"""How a service operation's answer becomes page content: which code page a login's
answer asks for, the enrolment it carries, a refusal as a form error, cookies and
redirects on the response."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from bastion.core import errors
from bastion.core.auth.passwords import MAX_LENGTH, MIN_LENGTH
from bastion.service.context import Cookie
from bastion.transports.http.cookies import with_cookies
from bastion.transports.http.errors import http_status
from bastion.transports.pages.render import FormError, field_for

__all__ = [
    "MFA_TEXT",
    "MfaText",
    "challenge_method",
    "enrolment_of",
    "form_error",
    "identifier_field",
    "password_hint",
    "redirect",
]


@dataclass(frozen=True, slots=True)
class MfaText:
    instructions: str
    code_label: str
    hint: str
    resendable: bool


#: What the code page says for each kind of challenge the service can return.
MFA_TEXT = {
    "email": MfaText(
        "We have emailed you a 6-digit code. Enter it to finish signing in.",
        "Code from the email",
        "",
        True,
    ),
    "sms": MfaText(
        "We have sent a 6-digit code to your phone. Enter it to finish signing in.",
        "Code from the text message",
        "",
        True,
    ),
    "totp": MfaText(
        "Open your authenticator app and enter the 6-digit code it shows.",
        "Authenticator code",
        "Lost your device? Enter one of your recovery codes instead.",
        False,
    ),
    # Parked for the user's passkey alone: no code to type (passkeys.js asks the device).
    "webauthn": MfaText(
        "Use your passkey to finish signing in.",
        "",
        "",
        False,
    ),
}


def identifier_field(value: str) -> dict[str, str]:
    """An email address or a phone number, as the service's request names it."""
    value = value.strip()
    return {"phone_number" if value and "@" not in value else "email": value}


def challenge_method(body: Mapping[str, Any]) -> str | None:
    if body.get("should_show_totp_screen"):
        return "totp"
    if body.get("should_show_email_otp_screen"):
        return "email"
    if body.get("should_show_mobile_otp_screen"):
        return "sms"
    if body.get("should_offer_webauthn_mfa_verify"):
        return "webauthn"
    return None


def form_error(error: errors.ClientError, fields: tuple[str, ...]) -> FormError:
    message = error.message[:1].upper() + error.message[1:]
    retry_after = error.retry_after if isinstance(error, errors.ResourceExhausted) else 0
    return FormError(message, field_for(error.message, fields), http_status(error), retry_after)


def password_hint(meta: Mapping[str, Any]) -> str:
    hint = f"Between {MIN_LENGTH} and {MAX_LENGTH} characters"
    if meta.get("is_strong_password_enabled"):
        return hint + ", with an uppercase letter, a lowercase letter, a digit and a symbol."
    return hint + "."


def redirect(location: str, cookies: Iterable[Cookie] = ()) -> Response:
    return with_cookies(Response(status_code=303, headers={"Location": location}), cookies)


def enrolment_of(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """A first authenticator enrolment as login returned it, for the code page."""
    image = body.get("authenticator_scanner_image")
    if not image:
        return None
    return {
        "image": image,
        "secret": body.get("authenticator_secret") or "",
        "recovery_codes": list(body.get("authenticator_recovery_codes") or ()),
    }
