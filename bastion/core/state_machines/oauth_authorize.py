"""The OAuth 2.0 / OpenID Connect authorize flow: ``/authorize``, the code's redemption at
``/oauth/token``, and binding a parked request to a login that carries its ``state``.

Rules / theory of operation
---------------------------
authorize (``AuthorizeRequested``)
  1. The parameters are checked by :func:`core.oauth.rfc6749_authorize.parse_authorize`.
     An unknown client or an untrusted ``redirect_uri`` is refused with a plain error
     (``Fail``: never a redirect); any other problem goes back to the redirect URI
     (``Deliver`` with ``error``, ``error_description`` and ``state``).
  2. No valid session (none presented, its user gone or revoked, or ``prompt=login`` /
     an exceeded ``max_age`` not yet answered by a login after the demand, see
     :mod:`core.oauth.oidc_reauthentication`): ``prompt=none``,
     or no login page, answers ``login_required`` to the redirect URI; otherwise the
     request is parked under its ``state`` (``StorePending``, with a code announced for
     code flows) and the browser goes to the login page with the original query
     (``RedirectToLogin``; ``screen_hint=signup``: the sign-up page). After the login
     the page sends the browser back to ``/authorize`` with the same query, which now
     finds the session.
  3. With a session: code flows store a fresh code bound to the session's user, roles and
     login method (``StoreCode``); flows that return tokens mint them (``IssueTokens``,
     with the request's ``nonce`` and the code's ``c_hash``) and keep them
     (``PersistSession``, with a ``session.created`` audit row). ``Deliver`` answers
     through the response mode.
redeem (``CodeRedemptionRequested``)
  4. The code is taken (``TakeCode``: get-and-delete). Unknown, expired or already used:
     ``invalid_grant``, and the tokens a first redemption got are revoked
     (``RevokeCodeTokens``).
  5. ``redirect_uri`` must equal the authorize request's. A code with a PKCE challenge
     needs the matching verifier; one without needs the client secret. A presented but
     wrong client secret is ``invalid_client`` either way.
  6. The session that got the code must still be live (``CheckSession``: a logout, a
     ``revoke_session`` from another device or any end of that session voids its codes).
     The user must still exist, not be revoked, and not have had their sessions ended since
     the session that got the code began (``LoadUser`` with ``session_started``: a
     password reset or an admin's revoke voids codes too); then tokens are minted under a new
     session (refresh token only with ``offline_access``), kept, remembered as this code's
     (``RememberCodeTokens``), audited (``session.created``), and returned (``Respond``).
bind (``LoginWithState``)
  7. A login carrying the ``state`` of a parked request stores that request's announced
     code, bound to the login and its session (Authorizer's login app redirects with it
     itself).

Its effects and their answers are :mod:`core.state_machines.oauth_authorize_effects`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from bastion.core.auth.claims import wants_refresh_token
from bastion.core.auth.policy import FlowEnv
from bastion.core.auth.responses import TokenResponse
from bastion.core.auth.user import User
from bastion.core.oauth import oidc_reauthentication as reauth
from bastion.core.oauth import rfc7636_pkce
from bastion.core.oauth.errors import InvalidClient, InvalidGrant, InvalidRequest, LoginRequired
from bastion.core.oauth.rfc6749_authorize import (
    AuthorizeRequest,
    ClientRefusal,
    RedirectRefusal,
    ResponseMode,
    parse_authorize,
)
from bastion.core.oauth.rfc6749_code import CodeGrant, PendingAuthorize
from bastion.core.state_machines._machine import SECRET, Effect, Event, Machine, Table, edge
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    Fail,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.oauth_authorize_effects import (
    CheckSession,
    CodeTaken,
    Deliver,
    RedirectToLogin,
    RememberCodeTokens,
    RevokeCodeTokens,
    SessionChecked,
    StoreCode,
    StorePending,
    TakeCode,
)

__all__ = [
    "AuthorizeRequested",
    "CodeRedemptionRequested",
    "LoginWithState",
    "OAuthAuthorizeMachine",
    "OAuthPolicy",
    "SessionGrant",
    "State",
]


class State(enum.Enum):
    START = "start"
    LOADING_USER = "loading_user"
    ISSUING_TOKENS = "issuing_tokens"
    TAKING_CODE = "taking_code"
    REDEEM_CHECKING_SESSION = "redeem_checking_session"
    REDEEM_LOADING_USER = "redeem_loading_user"
    REDEEM_ISSUING_TOKENS = "redeem_issuing_tokens"
    DONE = "done"
    FAILED = "failed"
    ERROR = "error"


# -- configuration and values ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class OAuthPolicy:
    client_id: str
    #: the MAC key of ``prompt=login`` / ``max_age`` demands (``oidc_reauthentication``)
    reauth_key: bytes = dataclasses.field(repr=False)
    #: ``--default-authorize-response-type`` (``code`` unless asked otherwise)
    default_response_type: str = "code"
    #: ``--default-authorize-response-mode``
    default_response_mode: ResponseMode = ResponseMode.QUERY
    #: ``--enable-login-page``: without it a browser with no session gets login_required
    login_page: bool = True


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SessionGrant:
    """The caller's valid browser session, as the transport verified it."""

    user_id: str
    roles: tuple[str, ...]
    login_method: str
    auth_time: int
    #: the session family's id (``sid``): a code it gets dies with it
    sid: str


# -- the events that start it ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuthorizeRequested(Event):
    #: the query (or form) parameters, first value of each
    params: Mapping[str, str]
    #: the transport's verdict on ``redirect_uri`` under ``--allowed-origins``
    redirect_allowed: bool
    session: SessionGrant | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CodeRedemptionRequested(Event):
    code: str = dataclasses.field(repr=False, metadata=SECRET)
    redirect_uri: str
    code_verifier: str | None = dataclasses.field(default=None, repr=False, metadata=SECRET)
    #: None: no client secret presented; else whether it matched (constant time)
    client_authenticated: bool | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoginWithState(Event):
    """A login (any flow) finished with the ``state`` of a parked request."""

    pending: PendingAuthorize
    user_id: str
    roles: tuple[str, ...]
    login_method: str
    auth_time: int
    #: the session family the login starts (or refreshes)
    sid: str


TABLE: Table[State] = {
    (State.START, AuthorizeRequested): edge(
        "_on_authorize", State.LOADING_USER, State.DONE, State.FAILED
    ),
    (State.LOADING_USER, UserLoaded): edge("_on_user", State.ISSUING_TOKENS, State.DONE),
    (State.ISSUING_TOKENS, TokensIssued): edge("_on_tokens", State.DONE),
    (State.START, CodeRedemptionRequested): edge("_on_redeem", State.TAKING_CODE, State.FAILED),
    (State.TAKING_CODE, CodeTaken): edge(
        "_on_code_taken", State.REDEEM_CHECKING_SESSION, State.REDEEM_LOADING_USER, State.FAILED
    ),
    (State.REDEEM_CHECKING_SESSION, SessionChecked): edge(
        "_on_session_checked", State.REDEEM_LOADING_USER, State.FAILED
    ),
    (State.REDEEM_LOADING_USER, UserLoaded): edge(
        "_on_redeem_user", State.REDEEM_ISSUING_TOKENS, State.FAILED
    ),
    (State.REDEEM_ISSUING_TOKENS, TokensIssued): edge("_on_redeem_tokens", State.DONE),
    (State.START, LoginWithState): edge("_on_login_with_state", State.DONE),
}


@dataclasses.dataclass(slots=True, kw_only=True)
class OAuthContext:
    request: AuthorizeRequest | None = None
    session: SessionGrant | None = None
    code: str | None = dataclasses.field(default=None, repr=False, metadata=SECRET)
    grant: CodeGrant | None = None
    redeem: CodeRedemptionRequested | None = None
    #: the user tokens are minted for (their audit row names them)
    user: User | None = None
    #: the original query, for the login page
    params: tuple[tuple[str, str], ...] = ()


def _usable(user: User | None) -> bool:
    return user is not None and user.revoked_timestamp is None


class OAuthAuthorizeMachine(Machine[State]):
    FLOW = "oauth_authorize"
    STATES = State
    TABLE = TABLE
    CONTEXT = OAuthContext
    EMITS = frozenset(
        {
            AuditRecord,
            CheckSession,
            Deliver,
            Fail,
            IssueTokens,
            LoadUser,
            PersistSession,
            RedirectToLogin,
            RememberCodeTokens,
            Respond,
            RevokeCodeTokens,
            StoreCode,
            StorePending,
            TakeCode,
        }
    )

    ctx: OAuthContext

    def __init__(self, env: FlowEnv, oauth: OAuthPolicy) -> None:
        super().__init__(env)
        self.oauth = oauth

    # -- authorize --------------------------------------------------------------------------

    def _on_authorize(self, event: AuthorizeRequested) -> tuple[list[Effect], State]:
        oauth = self.oauth
        parsed = parse_authorize(
            event.params,
            client_id=oauth.client_id,
            redirect_allowed=event.redirect_allowed,
            default_response_type=oauth.default_response_type,
            default_mode=oauth.default_response_mode,
        )
        if isinstance(parsed, ClientRefusal):
            return self._fail(parsed.error, parsed.message)
        if isinstance(parsed, RedirectRefusal):
            params = [("error", parsed.error.error), ("error_description", parsed.message)]
            if parsed.state is not None:
                params.append(("state", parsed.state))
            deliver = Deliver(
                redirect_uri=parsed.redirect_uri, mode=parsed.mode, params=tuple(params)
            )
            return [deliver], State.DONE
        self.ctx.request = parsed
        self.ctx.params = tuple(event.params.items())
        if event.session is None or self._must_log_in_again(parsed, event.session):
            return self._no_session()
        self.ctx.session = event.session
        return [LoadUser(user_id=event.session.user_id)], State.LOADING_USER

    def _error(self, error: str, message: str) -> Deliver:
        request = self._require(self.ctx.request)
        params = (("error", error), ("error_description", message), ("state", request.state))
        return Deliver(redirect_uri=request.redirect_uri, mode=request.response_mode, params=params)

    def _no_session(self) -> tuple[list[Effect], State]:
        request = self._require(self.ctx.request)
        if "none" in request.prompt or not self.oauth.login_page:
            return [self._error(LoginRequired.error, "login required")], State.DONE
        code = self._env.ids.new_id() if request.wants_code else None
        pending = PendingAuthorize(
            redirect_uri=request.redirect_uri,
            scope=request.scope,
            code=code,
            nonce=request.nonce,
            code_challenge=request.code_challenge,
            code_challenge_method=request.code_challenge_method,
        )
        query = tuple((k, v) for k, v in self.ctx.params if k not in ("code", reauth.PARAM))
        if "login" in request.prompt or request.max_age is not None:
            # whoever comes back must have logged in after this moment
            demand = reauth.marker(self.oauth.reauth_key, request.state, self._env.now())
            query += ((reauth.PARAM, demand),)
        if code is not None:
            query += (("code", code),)
        effects: list[Effect] = [
            StorePending(state=request.state, pending=pending),
            RedirectToLogin(params=query, signup=self._param("screen_hint") == "signup"),
        ]
        return effects, State.DONE

    def _must_log_in_again(self, request: AuthorizeRequest, session: SessionGrant) -> bool:
        """``prompt=login``, or ``max_age`` exceeded, not yet answered by a new login."""
        if not reauth.demanded(request.prompt, request.max_age, session.auth_time, self._env.now()):
            return False
        marker = self._param(reauth.PARAM)
        return not reauth.answered(self.oauth.reauth_key, request.state, marker, session.auth_time)

    def _param(self, name: str) -> str | None:
        return dict(self.ctx.params).get(name)

    def _on_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        if not _usable(event.user):
            return self._no_session()
        user, request = self._require(event.user), self._require(self.ctx.request)
        session = self._require(self.ctx.session)
        self.ctx.user = user
        effects: list[Effect] = []
        if request.wants_code:
            self.ctx.code = self._env.ids.new_id()
            grant = CodeGrant(
                user_id=user.id,
                roles=session.roles,
                scope=request.scope,
                login_method=session.login_method,
                redirect_uri=request.redirect_uri,
                auth_time=session.auth_time,
                nonce=request.nonce,
                code_challenge=request.code_challenge,
                code_challenge_method=request.code_challenge_method,
                session_id=session.sid,
            )
            effects.append(StoreCode(code=self.ctx.code, grant=grant))
        if not request.wants_tokens:
            params = (("code", self._require(self.ctx.code)), ("state", request.state))
            deliver = Deliver(
                redirect_uri=request.redirect_uri, mode=request.response_mode, params=params
            )
            return [*effects, deliver], State.DONE
        effects.append(
            IssueTokens(
                user=user,
                roles=session.roles,
                scope=request.scope,
                login_method=session.login_method,
                nonce=self._env.ids.new_id(),
                include_refresh_token=False,
                oidc_nonce=request.nonce,
                code=self.ctx.code,
                auth_time=session.auth_time,
            )
        )
        return effects, State.ISSUING_TOKENS

    def _on_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        request, session = self._require(self.ctx.request), self._require(self.ctx.session)
        tokens = event.tokens
        params: list[tuple[str, str]] = []
        if self.ctx.code is not None:
            params.append(("code", self.ctx.code))
        if "token" in request.response_type:
            params += [
                ("access_token", tokens.access_token),
                ("token_type", "Bearer"),
                ("expires_in", str(tokens.expires_in)),
            ]
        if "id_token" in request.response_type:
            params.append(("id_token", tokens.id_token))
        params.append(("state", request.state))
        persist = PersistSession(
            user_id=session.user_id, login_method=session.login_method, tokens=tokens
        )
        response_type = " ".join(sorted(request.response_type))
        audit = self._session_created({"response_type": response_type})
        deliver = Deliver(
            redirect_uri=request.redirect_uri, mode=request.response_mode, params=tuple(params)
        )
        return [persist, audit, deliver], State.DONE

    def _session_created(self, how: dict[str, str]) -> AuditRecord:
        """The audit row of a session the provider created (from /authorize or a code)."""
        user = self._require(self.ctx.user)
        return AuditRecord(
            action=AuditAction.SESSION_CREATED,
            actor_id=user.id,
            actor_email=user.email,
            resource_id=user.id,
            metadata={"client_id": self.oauth.client_id, **how},
        )

    # -- redeem -----------------------------------------------------------------------------

    def _on_redeem(self, event: CodeRedemptionRequested) -> tuple[list[Effect], State]:
        if event.client_authenticated is False:
            return self._fail(InvalidClient, "invalid client credentials")
        if not event.code:
            return self._fail(InvalidRequest, "code is required")
        if not event.redirect_uri:
            return self._fail(InvalidRequest, "redirect_uri is required")
        self.ctx.redeem = event
        return [TakeCode(code=event.code)], State.TAKING_CODE

    def _on_code_taken(self, event: CodeTaken) -> tuple[list[Effect], State]:
        redeem = self._require(self.ctx.redeem)
        grant = event.grant
        if grant is None:
            revoke = RevokeCodeTokens(code=redeem.code)
            fail, state = self._fail(
                InvalidGrant, "The authorization code is invalid or has expired"
            )
            return [revoke, *fail], state
        if grant.redirect_uri != redeem.redirect_uri:
            return self._fail(InvalidGrant, "redirect_uri does not match the authorization request")
        if grant.code_challenge is not None:
            if not redeem.code_verifier:
                return self._fail(InvalidRequest, "code_verifier is required")
            method = grant.code_challenge_method or "S256"
            if not rfc7636_pkce.verifier_matches(
                redeem.code_verifier, grant.code_challenge, method
            ):
                return self._fail(InvalidGrant, "code_verifier does not match the code_challenge")
        elif redeem.code_verifier:
            return self._fail(InvalidGrant, "code_verifier given but the code has no challenge")
        elif redeem.client_authenticated is not True:
            return self._fail(InvalidClient, "client authentication or PKCE is required")
        self.ctx.grant = grant
        if grant.session_id is not None:
            check = CheckSession(user_id=grant.user_id, sid=grant.session_id)
            return [check], State.REDEEM_CHECKING_SESSION
        return self._load_granted_user(grant)

    def _on_session_checked(self, event: SessionChecked) -> tuple[list[Effect], State]:
        if not event.alive:
            return self._fail(InvalidGrant, "The authorization code is invalid or has expired")
        return self._load_granted_user(self._require(self.ctx.grant))

    @staticmethod
    def _load_granted_user(grant: CodeGrant) -> tuple[list[Effect], State]:
        load = LoadUser(user_id=grant.user_id, session_started=grant.auth_time)
        return [load], State.REDEEM_LOADING_USER

    def _on_redeem_user(self, event: UserLoaded) -> tuple[list[Effect], State]:
        grant = self._require(self.ctx.grant)
        if not _usable(event.user):
            return self._fail(InvalidGrant, "The authorization code is invalid or has expired")
        self.ctx.user = self._require(event.user)
        issue = IssueTokens(
            user=self.ctx.user,
            roles=grant.roles,
            scope=grant.scope,
            login_method=grant.login_method,
            nonce=self._env.ids.new_id(),
            include_refresh_token=wants_refresh_token(grant.scope),
            oidc_nonce=grant.nonce,
            auth_time=grant.auth_time,
        )
        return [issue], State.REDEEM_ISSUING_TOKENS

    def _on_redeem_tokens(self, event: TokensIssued) -> tuple[list[Effect], State]:
        grant = self._require(self.ctx.grant)
        tokens = event.tokens
        result = TokenResponse(
            access_token=tokens.access_token,
            id_token=tokens.id_token,
            refresh_token=tokens.refresh_token,
            scope=grant.scope,
            roles=grant.roles,
            expires_in=tokens.expires_in,
        )
        return [
            PersistSession(user_id=grant.user_id, login_method=grant.login_method, tokens=tokens),
            RememberCodeTokens(
                code=self._require(self.ctx.redeem).code, user_id=grant.user_id, nonce=tokens.nonce
            ),
            self._session_created({"grant_type": "authorization_code"}),
            Respond(result=result),
        ], State.DONE

    # -- bind -------------------------------------------------------------------------------

    def _on_login_with_state(self, event: LoginWithState) -> tuple[list[Effect], State]:
        pending = event.pending
        if pending.code is None:
            return [], State.DONE
        grant = CodeGrant(
            user_id=event.user_id,
            roles=event.roles,
            scope=pending.scope,
            login_method=event.login_method,
            redirect_uri=pending.redirect_uri,
            auth_time=event.auth_time,
            nonce=pending.nonce,
            code_challenge=pending.code_challenge,
            code_challenge_method=pending.code_challenge_method,
            session_id=event.sid,
        )
        return [StoreCode(code=pending.code, grant=grant)], State.DONE
