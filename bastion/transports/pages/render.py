"""Rendering the login pages: Jinja2 templates from ``templates/``, always autoescaped.

Everything a page shows comes in through :class:`PageContext` (branding, the kept query,
the CSRF token, the error) plus the page's own variables; templates hold no logic beyond
choosing what to show.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from bastion.core.settings import Settings
from bastion.transports.pages.query import PageQuery

__all__ = [
    "SOCIAL_LABELS",
    "Branding",
    "FormError",
    "PageContext",
    "field_for",
    "render",
    "social_links",
    "when",
]

_TEMPLATES = Path(__file__).with_name("templates")
_ENV = Environment(
    loader=FileSystemLoader(_TEMPLATES),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def when(timestamp: int | None) -> str:
    """A Unix time as the pages show it (UTC: the server does not know the user's zone)."""
    if not timestamp:
        return ""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%d %b %Y, %H:%M UTC")


_ENV.filters["when"] = when

#: Button labels of the social providers, in meta's order.
SOCIAL_LABELS = {
    "google": "Google",
    "github": "GitHub",
    "facebook": "Facebook",
    "microsoft": "Microsoft",
    "twitch": "Twitch",
    "linkedin": "LinkedIn",
    "apple": "Apple",
    "discord": "Discord",
    "twitter": "Twitter",
    "roblox": "Roblox",
}


def _new_state() -> str:
    return secrets.token_urlsafe(16)


def social_links(
    issuer: str,
    query: PageQuery,
    meta: Mapping[str, Any],
    new_state: Callable[[], str] = _new_state,
) -> list[tuple[str, str]]:
    """(label, href) of ``/oauth_login/<provider>`` for each provider meta enables. The
    provider flow comes back to ``/app`` with this page's query, where the new session
    is forwarded as after a password login."""
    back = f"{issuer}{query.url('/app')}"
    return [
        (
            label,
            f"/oauth_login/{provider}?" + urlencode({"redirect_uri": back, "state": new_state()}),
        )
        for provider, label in SOCIAL_LABELS.items()
        if meta.get(f"is_{provider}_login_enabled")
    ]


def _default_logo() -> str:
    for flag in dataclasses.fields(Settings):
        if flag.name == "organization_logo":
            return str(flag.default)
    raise LookupError("organization_logo")


@dataclass(frozen=True, slots=True)
class Branding:
    """``--organization-name`` and ``--organization-logo``.

    The default logo is Authorizer's, on the internet: the pages load no asset from
    another site unless the operator names one, so it is shown only when given.
    """

    name: str
    logo: str

    @classmethod
    def from_settings(cls, settings: Settings) -> Branding:
        logo = settings.organization_logo
        return cls(settings.organization_name, "" if logo == _default_logo() else logo)


@dataclass(frozen=True, slots=True)
class FormError:
    """A refusal to show: the message, and the input it is about (None: the whole form)."""

    message: str
    field: str | None = None
    #: the HTTP status the page is answered with
    status: int = 400
    #: seconds for ``Retry-After`` (a throttled attempt), 0 for none
    retry_after: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PageContext:
    branding: Branding
    query: PageQuery
    csrf_token: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    error: FormError | None = None
    #: a confirmation shown above the form ("A new code has been sent.")
    notice: str = ""


#: Which input a service message is about, by the words it contains (first match wins).
_FIELD_WORDS = (
    ("otp", "otp"),
    ("match", "confirm_password"),
    ("password", "password"),
    ("phone", "identifier"),
    ("email", "email"),
)


def field_for(message: str, fields: tuple[str, ...]) -> str | None:
    """The form's input that ``message`` names, so the error can be tied to it."""
    lowered = message.lower()
    for word, name in _FIELD_WORDS:
        if word in lowered:
            if name in fields:
                return name
            if name == "email" and "identifier" in fields:
                return "identifier"
    return None


def render(template: str, page: PageContext, **values: Any) -> str:
    return _ENV.get_template(template).render(
        branding=page.branding,
        query=page.query,
        hidden=page.query.hidden_fields(),
        csrf_token=page.csrf_token,
        meta=page.meta,
        error=page.error,
        notice=page.notice,
        **values,
    )
