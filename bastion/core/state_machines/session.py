"""Sessions: rotation (``session``), refresh (``/oauth/token``), ``logout`` and ``revoke``.

Rules / theory of operation
---------------------------
A session is a triple in the session store, keyed ``<login_method>:<user_id>`` and
``{session_token,access_token,refresh_token}_<nonce>``; the nonce ties the three together.

rotate (``SessionRequested``)
  1. The cookie's decrypted claims must be complete and unexpired, the requested roles a
     subset of the session's, the stored value equal to the presented cookie (constant
     time), the user present and not revoked; anything else is Unauthenticated
     "unauthorized". ``required_relations``, if any, must all hold (PermissionDenied
     "unauthorized").
  2. Fresh tokens under a new nonce; the old triple is deleted (reference surprise 7,
     kept: a stale cookie stops working at once); the new cookie is set.
refresh (``RefreshRequested``)
  3. The same checks on a refresh token (claims incl. issuer, audience and type; stored
     value equal), each failure Unauthenticated "Invalid refresh token". Roles, scope and
     login method come from the old token; it is rotated away like a session.
logout (``LogoutRequested``)
  4. The caller's session (already authenticated by cookie or bearer) is deleted and the
     cookies cleared; no caller is Unauthenticated "unauthorized".
revoke (``RevokeRequested``)
  5. A refresh token without ``sub``/``nonce`` is InvalidArgument "invalid token", one not
     in the store NotFound "token not found", a different stored value InvalidArgument
     "token does not match"; else its triple is deleted: "Token revoked".
"""

from __future__ import annotations

import dataclasses
import enum
import hmac
from collections.abc import Mapping
from typing import Any

from bastion.core.auth.claims import TokenType, claims_are_valid, wants_refresh_token
from bastion.core.auth.responses import AuthResponse, MessageResponse, TokenResponse
from bastion.core.auth.user import User
from bastion.core.errors import (
    BastionError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from bastion.core.state_machines._machine import Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CheckRequiredRelations,
    ClearSessionCookie,
    DeleteSession,
    Fail,
    IssueTokens,
    LoadStoredToken,
    LoadUser,
    PersistSession,
    Respond,
    SetSessionCookie,
)
from bastion.core.state_machines.events import (
    RelationsChecked,
    StoredTokenLoaded,
    TokensIssued,
    UserLoaded,
)

__all__ = [
    "LogoutRequested",
    "RefreshRequested",
    "RevokeRequested",
    "SessionMachine",
    "SessionRef",
    "SessionRequested",
    "State",
]

UNAUTHORIZED = "unauthorized"
INVALID_REFRESH_TOKEN = "Invalid refresh token"
SESSION_REFRESHED = "Session token refreshed"
LOGGED_OUT = "Logged out successfully"
INVALID_TOKEN = "invalid token"
TOKEN_NOT_FOUND = "token not found"
TOKEN_MISMATCH = "token does not match"
TOKEN_REVOKED = "Token revoked"
SESSION_TOKEN = "session_token"


class State(enum.Enum):
    START = "start"
    #: rotate/refresh: waiting for the stored copy of the presented token
    LOADING_STORED = "loading_stored"
    #: rotate/refresh: waiting for the session's user
    LOADING_USER = "loading_user"
    #: rotate: waiting for the FGA gate
    CHECKING_RELATIONS = "checking_relations"
    #: rotate/refresh: waiting for ``TokensIssued``
    ISSUING_TOKENS = "issuing_tokens"
    #: revoke: waiting for the stored copy of the refresh token
    REVOKE_LOADING_STORED = "revoke_loading_stored"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


class Operation(enum.Enum):
    ROTATE = "rotate"
    REFRESH = "refresh"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SessionRef:
    """Which triple: the session-store key parts."""

    user_id: str
    login_method: str
    nonce: str
    #: when the user authenticated (carried into the new tokens); None in tokens from
    #: before bastion recorded it
    auth_time: int | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SessionRequested(Event):
    #: the raw ``cookie_session`` value, and its decrypted claims (``None`` if unreadable)
    cookie: str | None = dataclasses.field(default=None, repr=False)
    claims: Mapping[str, Any] | None = None
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    state: str | None = None
    required_relations: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RefreshRequested(Event):
    refresh_token: str = dataclasses.field(repr=False)
    #: claims after signature verification, ``None`` if the token is unreadable
    claims: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LogoutRequested(Event):
    #: the authenticated caller's session, ``None`` for no caller
    session: SessionRef | None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RevokeRequested(Event):
    refresh_token: str = dataclasses.field(repr=False)
    claims: Mapping[str, Any] | None = None


TABLE: Table[State] = {
    (State.START, SessionRequested): edge("_on_rotate", State.LOADING_STORED, State.FAILED),
    (State.START, RefreshRequested): edge("_on_refresh", State.LOADING_STORED, State.FAILED),
    (State.LOADING_STORED, StoredTokenLoaded): edge("_on_stored", State.LOADING_USER, State.FAILED),
    (State.LOADING_USER, UserLoaded): edge(
        "_on_user", State.CHECKING_RELATIONS, State.ISSUING_TOKENS, State.FAILED
    ),
    (State.CHECKING_RELATIONS, RelationsChecked): edge(
        "_on_relations", State.ISSUING_TOKENS, State.FAILED
    ),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.DONE),
    (State.START, LogoutRequested): edge("_on_logout", State.DONE, State.FAILED),
    (State.START, RevokeRequested): edge("_on_revoke", State.REVOKE_LOADING_STORED, State.FAILED),
    (State.REVOKE_LOADING_STORED, StoredTokenLoaded): edge(
        "_on_revoke_stored", State.DONE, State.FAILED
    ),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class SessionContext:
    operation: Operation = Operation.ROTATE
    old: SessionRef | None = None
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    oauth_state: str | None = None
    required_relations: tuple[tuple[str, str], ...] = ()
    user: User | None = None


def _session_parts(
    claims: Mapping[str, Any],
) -> tuple[SessionRef, tuple[str, ...], tuple[str, ...]] | None:
    """Key, roles and scope from session or refresh claims, if they are well formed."""
    sub, nonce, method = claims.get("sub"), claims.get("nonce"), claims.get("login_method")
    roles, scope = claims.get("roles", []), claims.get("scope", [])
    if not (isinstance(sub, str) and sub and isinstance(nonce, str) and nonce):
        return None
    if not isinstance(method, str):
        return None
    if not _strings(roles) or not _strings(scope):
        return None
    auth_time = claims.get("auth_time")
    ref = SessionRef(
        user_id=sub,
        login_method=method,
        nonce=nonce,
        auth_time=auth_time if type(auth_time) is int else None,
    )
    return ref, tuple(roles), tuple(scope)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class SessionMachine(Machine[State]):
    FLOW = "session"
    STATES = State
    TABLE = TABLE
    CONTEXT = SessionContext
    EMITS = frozenset(
        {
            AuditRecord,
            CheckRequiredRelations,
            ClearSessionCookie,
            DeleteSession,
            Fail,
            IssueTokens,
            LoadStoredToken,
            LoadUser,
            PersistSession,
            Respond,
            SetSessionCookie,
        }
    )
    ctx: SessionContext

    # -- rotate and refresh ---------------------------------------------------------------

    def _on_rotate(self, event: SessionRequested) -> tuple[list[Effect], State]:
        self.ctx.operation = Operation.ROTATE
        claims = event.claims
        parts = None if claims is None or not event.cookie else _session_parts(claims)
        exp = None if claims is None else claims.get("exp")
        if parts is None or not isinstance(exp, int) or exp <= self._env.now():
            return self._refuse()
        old, roles, scope = parts
        if not set(event.roles) <= set(roles):
            return self._refuse()
        self._hold(old, roles, event.scope or scope, event.state, event.required_relations)
        self._secret = event.cookie
        load = LoadStoredToken(
            user_id=old.user_id,
            login_method=old.login_method,
            nonce=old.nonce,
            kind=SESSION_TOKEN,
        )
        return [load], State.LOADING_STORED

    def _on_refresh(self, event: RefreshRequested) -> tuple[list[Effect], State]:
        self.ctx.operation = Operation.REFRESH
        claims = event.claims
        valid = claims is not None and claims_are_valid(
            claims, policy=self.policy, token_type=TokenType.REFRESH, now=self._env.now()
        )
        parts = _session_parts(claims) if valid and claims is not None else None
        if parts is None:
            return self._refuse()
        old, roles, scope = parts
        self._hold(old, roles, scope, None, ())
        self._secret = event.refresh_token
        load = LoadStoredToken(
            user_id=old.user_id,
            login_method=old.login_method,
            nonce=old.nonce,
            kind=TokenType.REFRESH.value,
        )
        return [load], State.LOADING_STORED

    def _hold(
        self,
        old: SessionRef,
        roles: tuple[str, ...],
        scope: tuple[str, ...],
        oauth_state: str | None,
        relations: tuple[tuple[str, str], ...],
    ) -> None:
        self.ctx.old, self.ctx.roles, self.ctx.scope = old, roles, scope
        self.ctx.oauth_state, self.ctx.required_relations = oauth_state, relations

    def _on_stored(self, event: StoredTokenLoaded) -> tuple[list[Effect], State]:
        presented, self._secret = self._need_secret(), None
        old = self._require(self.ctx.old)
        if event.token is None or not _equal(event.token, presented):
            return self._refuse()
        return [LoadUser(user_id=old.user_id)], State.LOADING_USER

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        user = event.user
        if user is None or user.is_revoked:
            return self._refuse()
        self.ctx.user = user
        if self.ctx.required_relations:
            check = CheckRequiredRelations(user_id=user.id, relations=self.ctx.required_relations)
            return [check], State.CHECKING_RELATIONS
        return [self._issue(user)], State.ISSUING_TOKENS

    def _on_relations(self, event: RelationsChecked) -> tuple[list[Effect], State]:
        if not event.allowed:
            return self._fail(PermissionDenied, UNAUTHORIZED)
        return [self._issue(self._require(self.ctx.user))], State.ISSUING_TOKENS

    def _issue(self, user: User) -> IssueTokens:
        old = self._require(self.ctx.old)
        return IssueTokens(
            user=user,
            roles=self.ctx.roles,
            scope=self.ctx.scope,
            login_method=old.login_method,
            nonce=self._env.ids.new_id(),
            include_refresh_token=wants_refresh_token(self.ctx.scope),
            state=self.ctx.oauth_state,
            auth_time=old.auth_time,
        )

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        user, old, tokens = self._require(self.ctx.user), self._require(self.ctx.old), event.tokens
        rotation: list[Effect] = [
            DeleteSession(user_id=old.user_id, login_method=old.login_method, nonce=old.nonce),
            PersistSession(user_id=user.id, login_method=old.login_method, tokens=tokens),
            SetSessionCookie(value=tokens.session_token),
        ]
        if self.ctx.operation is Operation.ROTATE:
            response = Respond(result=AuthResponse.with_tokens(SESSION_REFRESHED, user, tokens))
            return [*rotation, response], State.DONE
        audit = AuditRecord(
            action=AuditAction.TOKEN_REFRESHED,
            actor_id=user.id,
            actor_email=user.email,
            resource_type="token",
            resource_id=user.id,
        )
        result = TokenResponse(
            access_token=tokens.access_token,
            id_token=tokens.id_token,
            refresh_token=tokens.refresh_token,
            scope=self.ctx.scope,
            roles=self.ctx.roles,
            expires_in=tokens.expires_in,
        )
        return [*rotation, audit, Respond(result=result)], State.DONE

    def _refuse(self) -> tuple[list[Effect], State]:
        if self.ctx.operation is Operation.ROTATE:
            return self._fail(Unauthenticated, UNAUTHORIZED)
        return self._fail(Unauthenticated, INVALID_REFRESH_TOKEN)

    # -- logout ---------------------------------------------------------------------------

    def _on_logout(self, event: LogoutRequested) -> tuple[list[Effect], State]:
        session = event.session
        if session is None:
            return self._fail(Unauthenticated, UNAUTHORIZED)
        return [
            DeleteSession(
                user_id=session.user_id, login_method=session.login_method, nonce=session.nonce
            ),
            ClearSessionCookie(),
            AuditRecord(
                action=AuditAction.LOGOUT,
                actor_id=session.user_id,
                resource_type="session",
                resource_id=session.user_id,
            ),
            Respond(result=MessageResponse(message=LOGGED_OUT)),
        ], State.DONE

    # -- revoke ---------------------------------------------------------------------------

    def _on_revoke(self, event: RevokeRequested) -> tuple[list[Effect], State]:
        parts = None if event.claims is None else _session_parts(event.claims)
        if parts is None:
            return self._fail(InvalidArgument, INVALID_TOKEN)
        old = self.ctx.old = parts[0]
        self._secret = event.refresh_token
        load = LoadStoredToken(
            user_id=old.user_id,
            login_method=old.login_method,
            nonce=old.nonce,
            kind=TokenType.REFRESH.value,
        )
        return [load], State.REVOKE_LOADING_STORED

    def _on_revoke_stored(self, event: StoredTokenLoaded) -> tuple[list[Effect], State]:
        presented, self._secret = self._need_secret(), None
        old = self._require(self.ctx.old)
        problem: tuple[type[BastionError], str] | None = None
        if event.token is None:
            problem = NotFound, TOKEN_NOT_FOUND
        elif not _equal(event.token, presented):
            problem = InvalidArgument, TOKEN_MISMATCH
        if problem is not None:
            return self._fail(*problem)
        return [
            DeleteSession(user_id=old.user_id, login_method=old.login_method, nonce=old.nonce),
            AuditRecord(
                action=AuditAction.TOKEN_REVOKED,
                actor_id=old.user_id,
                resource_type="token",
                resource_id=old.user_id,
            ),
            Respond(result=MessageResponse(message=TOKEN_REVOKED)),
        ], State.DONE
