"""The tail every flow that signs a user in shares (login, signup, the second factor,
email verification and magic links, social login): ask for tokens, then keep the session
and set its cookie. One place, so the flows cannot drift apart on what a session is."""

from __future__ import annotations

from bastion.core.auth.claims import wants_refresh_token
from bastion.core.auth.responses import IssuedTokens
from bastion.core.auth.user import User
from bastion.core.ports import IdSource
from bastion.core.state_machines._machine import Effect
from bastion.core.state_machines.effects import IssueTokens, PersistSession, SetSessionCookie

__all__ = ["issue_tokens", "keep_session"]


def issue_tokens(
    ids: IdSource,
    *,
    user: User,
    roles: tuple[str, ...],
    scope: tuple[str, ...],
    login_method: str,
    state: str | None,
) -> IssueTokens:
    """Tokens for a new session: a fresh nonce, a refresh token when the scope asks."""
    return IssueTokens(
        user=user,
        roles=roles,
        scope=scope,
        login_method=login_method,
        nonce=ids.new_id(),
        include_refresh_token=wants_refresh_token(scope),
        state=state,
    )


def keep_session(
    user: User, login_method: str, tokens: IssuedTokens, *, fresh_factor: bool = False
) -> list[Effect]:
    """Store the session and its tokens, and set the session cookie; ``fresh_factor``: a
    second factor won it just now."""
    persist = PersistSession(
        user_id=user.id, login_method=login_method, tokens=tokens, fresh_factor=fresh_factor
    )
    return [persist, SetSessionCookie(value=tokens.session_token)]
