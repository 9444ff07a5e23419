"""The links we email: always built from ``--url``, never from a request header."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode, urlsplit, urlunsplit

from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.policy import AuthPolicy

__all__ = [
    "add_query",
    "default_redirect",
    "emailed_link",
    "reset_password_redirect",
    "verify_email_link",
]


def add_query(url: str, params: Sequence[tuple[str, str]]) -> str:
    """``url`` with ``params`` appended to its query, order kept; empty values dropped."""
    kept = [(k, v) for k, v in params if v]
    if not kept:
        return url
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, urlencode(kept)) if q)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def default_redirect(policy: AuthPolicy) -> str:
    return f"{policy.issuer}/app"


def reset_password_redirect(policy: AuthPolicy, redirect_uri: str | None) -> str:
    return redirect_uri or policy.reset_password_url or f"{policy.issuer}/app/reset-password"


def verify_email_link(policy: AuthPolicy, token: str, redirect_uri: str) -> str:
    """The ``GET /verify_email`` landing link (signup, magic link, email change)."""
    return add_query(
        f"{policy.issuer}/verify_email", [("token", token), ("redirect_uri", redirect_uri)]
    )


def emailed_link(policy: AuthPolicy, identifier: EmailEvent, token: str, redirect_uri: str) -> str:
    """The link a verification email carries: a reset link goes straight to the reset
    page (``<redirect>?token=...``), every other one to ``/verify_email``."""
    if identifier is EmailEvent.FORGOT_PASSWORD:
        return add_query(redirect_uri, [("token", token)])
    return verify_email_link(policy, token, redirect_uri)
