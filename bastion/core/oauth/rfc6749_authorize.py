"""The authorization request (RFC 6749 §4.1.1 / §4.2.1, OIDC Core §3): parsing and rules.

Two kinds of refusal (RFC 6749 §4.1.2.1):

* the client or the redirect URI cannot be trusted (unknown ``client_id``, missing or
  disallowed ``redirect_uri``): the browser gets a plain 400, never a redirect (no open
  redirect);
* anything else: the error goes back to the (now trusted) redirect URI, through the
  response mode, with the request's ``state``.

Response types are those of reference §5.5. ``query`` is refused for any response type
that returns a token (tokens in a URL that servers log); the default mode is
``--default-authorize-response-mode`` for ``code`` and ``fragment`` for the others.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from bastion.core.oauth import rfc7636_pkce
from bastion.core.oauth.errors import (
    InvalidClient,
    InvalidRequest,
    OAuthError,
    UnsupportedResponseType,
)

__all__ = [
    "DEFAULT_SCOPE",
    "RESPONSE_TYPES",
    "AuthorizeRequest",
    "ClientRefusal",
    "RedirectRefusal",
    "ResponseMode",
    "parse_authorize",
]

DEFAULT_SCOPE: tuple[str, ...] = ("openid", "profile", "email")
CODE_ONLY: frozenset[str] = frozenset({"code"})


class ResponseMode(enum.Enum):
    QUERY = "query"
    FRAGMENT = "fragment"
    #: an auto-submitting HTML form POSTs the answer (OAuth 2.0 Form Post Response Mode)
    FORM_POST = "form_post"
    #: an HTML page ``postMessage``s the answer to the opener (Authorizer's web_message)
    WEB_MESSAGE = "web_message"


#: every response type we answer, as sets of their space-separated parts
RESPONSE_TYPES: frozenset[frozenset[str]] = frozenset(
    frozenset(t.split())
    for t in (
        "code",
        "token",
        "id_token",
        "code id_token",
        "code token",
        "code id_token token",
        "id_token token",
    )
)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizeRequest:
    client_id: str
    redirect_uri: str
    #: the parts of ``response_type`` ("code", "token", "id_token")
    response_type: frozenset[str]
    response_mode: ResponseMode
    state: str
    scope: tuple[str, ...]
    nonce: str | None = None
    code_challenge: str | None = None
    code_challenge_method: str | None = None
    prompt: tuple[str, ...] = ()
    #: OIDC ``max_age``: seconds since the user authenticated beyond which they log in again
    max_age: int | None = None

    @property
    def wants_code(self) -> bool:
        return "code" in self.response_type

    @property
    def wants_tokens(self) -> bool:
        """Tokens straight from /authorize (implicit or hybrid)."""
        return bool(self.response_type - {"code"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClientRefusal:
    """The request could not be tied to a trusted redirect URI: answer 400, no redirect."""

    error: type[OAuthError]
    message: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RedirectRefusal:
    """A refusal to send back to ``redirect_uri`` through ``mode``."""

    redirect_uri: str
    mode: ResponseMode
    state: str | None
    error: type[OAuthError]
    message: str


def _mode_for(
    params: Mapping[str, str], response_type: frozenset[str] | None, default_mode: ResponseMode
) -> ResponseMode | None:
    raw = params.get("response_mode", "")
    if raw:
        try:
            return ResponseMode(raw)
        except ValueError:
            return None
    if response_type is not None and response_type != CODE_ONLY:
        return ResponseMode.FRAGMENT if default_mode is ResponseMode.QUERY else default_mode
    return default_mode


def parse_authorize(
    params: Mapping[str, str],
    *,
    client_id: str,
    redirect_allowed: bool,
    default_response_type: str,
    default_mode: ResponseMode,
) -> AuthorizeRequest | ClientRefusal | RedirectRefusal:
    """The request, or how to refuse it. ``redirect_allowed`` is the transport's verdict
    on ``redirect_uri`` under ``--allowed-origins``."""
    if not params.get("client_id"):
        return ClientRefusal(error=InvalidRequest, message="client_id is required")
    if params["client_id"] != client_id:
        return ClientRefusal(error=InvalidClient, message="The client_id is invalid")
    redirect_uri = params.get("redirect_uri", "")
    if not redirect_uri:
        return ClientRefusal(error=InvalidRequest, message="redirect_uri is required")
    if not redirect_allowed:
        return ClientRefusal(error=InvalidRequest, message="invalid redirect_uri")

    raw_type = params.get("response_type") or default_response_type
    response_type: frozenset[str] | None = frozenset(raw_type.split())
    if response_type not in RESPONSE_TYPES:
        response_type = None
    mode = _mode_for(params, response_type, default_mode)
    state = params.get("state") or None

    def refuse(error: type[OAuthError], message: str) -> RedirectRefusal:
        fallback = ResponseMode.FRAGMENT if response_type != CODE_ONLY else default_mode
        return RedirectRefusal(
            redirect_uri=redirect_uri,
            mode=mode or fallback,
            state=state,
            error=error,
            message=message,
        )

    if response_type is None:
        return refuse(UnsupportedResponseType, f"response_type {raw_type} is not supported")
    if mode is None:
        return refuse(InvalidRequest, "response_mode is not supported")
    if state is None:
        return refuse(InvalidRequest, "state parameter is required")
    if mode is ResponseMode.QUERY and response_type != CODE_ONLY:
        return refuse(InvalidRequest, "response_mode query is only allowed with response_type code")
    nonce = params.get("nonce") or None
    if "id_token" in response_type and response_type != CODE_ONLY and nonce is None:
        return refuse(InvalidRequest, "nonce is required for this response_type")
    challenge = params.get("code_challenge") or None
    method = params.get("code_challenge_method") or None
    if method is not None and challenge is None:
        return refuse(InvalidRequest, "code_challenge_method without code_challenge")
    if challenge is not None:
        method = method or "S256"
        if method not in rfc7636_pkce.METHODS:
            return refuse(InvalidRequest, "code_challenge_method must be S256")
        if not rfc7636_pkce.challenge_is_valid(challenge):
            return refuse(InvalidRequest, "invalid code_challenge")
    raw_max_age = params.get("max_age") or None
    if raw_max_age is not None and not (raw_max_age.isascii() and raw_max_age.isdigit()):
        return refuse(InvalidRequest, "max_age must be a whole number of seconds")
    scope = tuple(dict.fromkeys(params.get("scope", "").split())) or DEFAULT_SCOPE
    return AuthorizeRequest(
        client_id=client_id,
        redirect_uri=redirect_uri,
        response_type=response_type,
        response_mode=mode,
        state=state,
        scope=scope,
        nonce=nonce,
        code_challenge=challenge,
        code_challenge_method=method if challenge else None,
        prompt=tuple(params.get("prompt", "").split()),
        max_age=int(raw_max_age) if raw_max_age is not None else None,
    )
