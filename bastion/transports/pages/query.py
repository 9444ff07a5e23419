"""What the login pages carry from page to page: the query they were opened with.

Two ways to arrive at ``/app`` with a query:

- from ``/authorize`` without a session: the original authorize request (``client_id``,
  ``redirect_uri``, ``response_type``, ``state``, ...). The pages keep it, untouched,
  through every page and form (hidden fields); after a successful login, signup or MFA
  challenge the browser goes back to ``/authorize?<the same query>``, which now finds the
  session and answers the client. The client's ``redirect_uri`` is never followed here:
  ``/authorize`` validates it.
- from an application with ``?redirect_uri=<where to go after login>``: followed only if
  ``--allowed-origins`` (or the server's own origin) admits it, so the page is no open
  redirect.

Only the parameters listed in :data:`KEPT_PARAMS` survive, each bounded in length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from bastion.core.oauth import oidc_reauthentication as reauth

__all__ = ["HIDDEN_PREFIX", "KEPT_PARAMS", "MAX_VALUE_LENGTH", "PageQuery"]

#: The authorize request's parameters (reference §5.5), kept in this order.
KEPT_PARAMS = (
    "client_id",
    "redirect_uri",
    "response_type",
    "response_mode",
    "state",
    "scope",
    "nonce",
    "code_challenge",
    "code_challenge_method",
    "prompt",
    "max_age",
    "login_hint",
    "ui_locales",
    "id_token_hint",
    "screen_hint",
    # /authorize's mark of a demanded login (prompt=login / max_age), carried back to it
    reauth.PARAM,
)
#: Hidden form fields carrying the query are named ``q.<param>``: never an input's name.
HIDDEN_PREFIX = "q."
#: Longer values are dropped: no legitimate authorize parameter comes near it.
MAX_VALUE_LENGTH = 4096


@dataclass(frozen=True, slots=True)
class PageQuery:
    """The kept parameters, in :data:`KEPT_PARAMS` order, empty values dropped."""

    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, source: Mapping[str, str], prefix: str = "") -> PageQuery:
        """From a request's query string, or a form's hidden fields (``prefix="q."``)."""
        kept = []
        for name in KEPT_PARAMS:
            value = source.get(prefix + name) or ""
            if value and len(value) <= MAX_VALUE_LENGTH:
                kept.append((name, value))
        return cls(tuple(kept))

    def get(self, name: str) -> str:
        return dict(self.params).get(name, "")

    @property
    def is_authorize(self) -> bool:
        """Opened by ``/authorize``: it has ``response_type`` or ``client_id``, and ``state``."""
        return bool(self.get("state")) and bool(self.get("response_type") or self.get("client_id"))

    def asks_login(self, auth_time: int) -> bool:
        """Must a browser whose user authenticated at ``auth_time`` log in again here? When
        ``/authorize`` demanded a login since then (its mark: checked there, only read
        here), or the client asks for a fresh one outright."""
        demanded_at = reauth.marker_time(self.get(reauth.PARAM))
        if demanded_at is not None:
            return auth_time <= demanded_at
        return "login" in self.get("prompt").split() or self.get("max_age") == "0"

    def encoded(self) -> str:
        return urlencode(self.params)

    def url(self, path: str) -> str:
        """``path`` with this query (no ``?`` when it is empty)."""
        return f"{path}?{self.encoded()}" if self.params else path

    def hidden_fields(self) -> tuple[tuple[str, str], ...]:
        """The query as hidden form fields: ``q.<name>`` so they never clash with inputs."""
        return tuple((HIDDEN_PREFIX + name, value) for name, value in self.params)

    def after_login(self, issuer: str, redirect_allowed: Callable[[str], bool]) -> str | None:
        """Where the browser goes after a successful login: back to ``/authorize``, to an
        allowed ``redirect_uri``, or None for the signed-in page."""
        if self.is_authorize:
            return f"{issuer}/authorize?{self.encoded()}"
        wanted = self.get("redirect_uri")
        if wanted and redirect_allowed(wanted):
            return wanted
        return None

    def refused_redirect(self, redirect_allowed: Callable[[str], bool]) -> bool:
        """A plain (non-authorize) ``redirect_uri`` that our origin rules refuse."""
        wanted = self.get("redirect_uri")
        return not self.is_authorize and bool(wanted) and not redirect_allowed(wanted)
