"""The OAuth/OIDC provider operations, on top of the authentication service.

``authorize`` and ``redeem`` run :class:`~core.state_machines.oauth_authorize.OAuthAuthorizeMachine`
and carry out its effects here; ``bind_state`` is the hook the authentication flows call
when they mint tokens for a login that carries an authorize ``state``. ``introspect``,
``userinfo`` and ``end_session`` are plain reads and deletes over the session store.
"""

from __future__ import annotations

import dataclasses
import hmac
from collections.abc import Mapping
from typing import Any

from bastion.core.auth.claims import TokenType, claims_are_valid
from bastion.core.auth.links import add_query
from bastion.core.errors import Internal
from bastion.core.oauth import oidc_reauthentication as reauth
from bastion.core.oauth import oidc_userinfo, rfc7662_introspection
from bastion.core.oauth.errors import InvalidClient, InvalidRequest, InvalidToken
from bastion.core.oauth.rfc6749_authorize import ResponseMode
from bastion.core.settings import Settings
from bastion.core.state_machines._machine import Effect, Event, Fail
from bastion.core.state_machines.effects import (
    AuditRecord,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.oauth_authorize import (
    AuthorizeRequested,
    CodeRedemptionRequested,
    LoginWithState,
    OAuthAuthorizeMachine,
    OAuthPolicy,
    SessionGrant,
    State,
)
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
from bastion.service.auth.flow_sql import audit_entry, load_user
from bastion.service.auth.service import AuthService
from bastion.service.auth.sessions import ACCESS, REFRESH
from bastion.service.context import CallerContext, Cookie, Reply
from bastion.service.oauth.backchannel import enqueue_logout
from bastion.service.oauth.store import OAuthStore
from bastion.storage import users as user_rows
from bastion.storage.audit import record

__all__ = ["LoggedOut", "OAuthService"]

Terminal = Deliver | RedirectToLogin | Respond


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoggedOut:
    """RP-initiated logout done: where to send the browser (None: show a page)."""

    redirect: str | None
    cookies: tuple[Cookie, ...]


def oauth_policy(settings: Settings) -> OAuthPolicy:
    return OAuthPolicy(
        client_id=settings.client_id,
        reauth_key=reauth.derive_key(settings.client_secret),
        default_response_type=settings.default_authorize_response_type,
        default_response_mode=ResponseMode(settings.default_authorize_response_mode),
        login_page=settings.enable_login_page,
    )


class OAuthService:
    def __init__(self, auth: AuthService) -> None:
        self.auth = auth
        self.settings = auth.settings
        self.store = OAuthStore(auth.storage.memory)
        self.policy = oauth_policy(auth.settings)

    # -- checks the transport needs ---------------------------------------------------------

    def redirect_allowed(self, uri: str) -> bool:
        """``--allowed-origins`` (same origin as ``--url`` when every origin is allowed);
        a fragment is never part of a redirect URI (RFC 6749 §3.1.2)."""
        return "#" not in uri and self.auth.redirect_allowed(uri)

    def client_secret_ok(self, client_id: str, secret: str) -> bool:
        """Constant-time; both compared so the timing tells nothing about which failed."""
        id_ok = hmac.compare_digest(client_id.encode(), self.settings.client_id.encode())
        # During a rotation the secret being replaced is accepted too; both compared always.
        accepted = (self.settings.client_secret, self.settings.client_secret_previous)
        secret_ok = any(
            [hmac.compare_digest(secret.encode(), known.encode()) for known in accepted if known]
        )
        return id_ok and secret_ok

    # -- the machine's driver ---------------------------------------------------------------

    def _machine(self) -> OAuthAuthorizeMachine:
        return OAuthAuthorizeMachine(self.auth.env, self.policy)

    async def _run(
        self, machine: OAuthAuthorizeMachine, event: Event, caller: CallerContext
    ) -> Terminal | None:
        effects = machine.handle(event)
        while True:
            reply: Event | None = None
            for effect in effects:
                if isinstance(effect, Fail):
                    raise effect.exception()
                if isinstance(effect, Deliver | RedirectToLogin | Respond):
                    return effect
                if effect.replies:
                    reply = await self._answer(effect)
                else:
                    await self._do(effect, caller)
            if reply is None:
                if machine.state is State.DONE:
                    return None
                raise Internal("oauth flow stopped without an answer")
            effects = machine.handle(reply)

    async def _answer(self, effect: Effect) -> Event:
        auth = self.auth
        if isinstance(effect, LoadUser):
            return UserLoaded(user=await auth.storage.db.run(lambda c: load_user(c, effect)))
        if isinstance(effect, IssueTokens):
            now = int(auth.clock.now())
            return TokensIssued(tokens=await auth.mint(effect, sid=effect.nonce, now=now))
        if isinstance(effect, TakeCode):
            return CodeTaken(grant=await self.store.take_code(effect.code))
        if isinstance(effect, CheckSession):
            return SessionChecked(alive=await auth.sessions.alive(effect.user_id, effect.sid))
        raise Internal(f"no answer for {type(effect).__name__}")

    async def _do(self, effect: Effect, caller: CallerContext) -> None:
        if isinstance(effect, AuditRecord):
            entry, now = audit_entry(effect, caller), int(self.auth.clock.now())
            await self.auth.storage.db.write_one(lambda conn: record(conn, entry, now=now))
        elif isinstance(effect, StoreCode):
            await self.store.store_code(effect.code, effect.grant)
        elif isinstance(effect, StorePending):
            await self.store.park(effect.state, effect.pending)
        elif isinstance(effect, PersistSession):
            # a new session family: its sid is its first nonce (as the login flows do)
            await self.auth.sessions.persist(
                effect.user_id,
                effect.tokens.nonce,
                effect.tokens,
                ip=caller.client_ip,
                user_agent=caller.user_agent,
            )
        elif isinstance(effect, RememberCodeTokens):
            await self.store.remember_issued(effect.code, effect.user_id, effect.nonce)
        elif isinstance(effect, RevokeCodeTokens):
            issued = await self.store.take_issued(effect.code)
            if issued is not None:
                await self.auth.sessions.end_family(*issued)
        else:
            raise Internal(f"cannot carry out {type(effect).__name__}")

    # -- operations -------------------------------------------------------------------------

    async def _session(self, caller: CallerContext) -> SessionGrant | None:
        """The browser's session cookie, if valid (a bearer token is not a browser session)."""
        if not self.auth.cookies.presented(caller):
            return None
        who = await self.auth.authenticate(dataclasses.replace(caller, bearer_token=None))
        if who is None:
            return None
        return SessionGrant(
            user_id=who.user_id,
            roles=who.roles,
            login_method=who.login_method,
            auth_time=who.auth_time,
            sid=who.sid,
        )

    async def authorize(
        self, params: Mapping[str, str], caller: CallerContext
    ) -> Deliver | RedirectToLogin:
        event = AuthorizeRequested(
            params=dict(params),
            redirect_allowed=self.redirect_allowed(params.get("redirect_uri", "")),
            session=await self._session(caller),
        )
        answer = await self._run(self._machine(), event, caller)
        if not isinstance(answer, Deliver | RedirectToLogin):
            raise Internal("authorize ended without an answer")
        return answer

    async def redeem(
        self,
        form: Mapping[str, Any],
        caller: CallerContext,
        *,
        client_authenticated: bool | None,
    ) -> Reply:
        """The ``authorization_code`` grant."""
        event = CodeRedemptionRequested(
            code=_text(form, "code"),
            redirect_uri=_text(form, "redirect_uri"),
            code_verifier=_text(form, "code_verifier") or None,
            client_authenticated=client_authenticated,
        )
        answer = await self._run(self._machine(), event, caller)
        if not isinstance(answer, Respond):
            raise Internal("redemption ended without tokens")
        return Reply(answer.result.to_api_dict())

    async def bind_state(
        self, effect: IssueTokens, caller: CallerContext, sid: str, now: int
    ) -> IssueTokens:
        """A login carrying the ``state`` of a parked authorize request: bind the request's
        announced code to it and to its session family ``sid`` (the code dies with that
        session), authenticated at ``now`` (when the login's tokens are minted), and give
        the ID token the request's ``nonce``."""
        if effect.state is None:
            return effect
        pending = await self.store.take_pending(effect.state)
        if pending is None:
            return effect
        event = LoginWithState(
            pending=pending,
            user_id=effect.user.id,
            roles=effect.roles,
            login_method=effect.login_method,
            auth_time=now,
            sid=sid,
        )
        await self._run(self._machine(), event, caller)
        return dataclasses.replace(effect, oidc_nonce=pending.nonce or effect.oidc_nonce)

    async def _live_claims(self, token: str) -> dict[str, Any] | None:
        """The claims of an access or refresh token we issued that is still live."""
        auth = self.auth
        claims = auth._verified(token)
        if claims is None:
            return None
        kinds = {TokenType.ACCESS.value: ACCESS, TokenType.REFRESH.value: REFRESH}
        kind = kinds.get(str(claims.get("token_type")))
        now = int(auth.clock.now())
        if kind is None or not claims_are_valid(
            claims, policy=auth.policy, token_type=str(claims["token_type"]), now=now
        ):
            return None
        if await auth._from_stored(claims, kind, token) is None:
            return None
        return claims

    async def introspect(self, token: str) -> dict[str, Any]:
        claims = await self._live_claims(token) if token else None
        if claims is None:
            return dict(rfc7662_introspection.INACTIVE)
        return rfc7662_introspection.active_response(claims, client_id=self.settings.client_id)

    async def userinfo(self, caller: CallerContext) -> dict[str, Any]:
        token = caller.bearer_token
        claims = await self._live_claims(token) if token else None
        if claims is None or claims.get("token_type") != TokenType.ACCESS.value:
            raise InvalidToken("The access token is invalid or has expired")
        sub = str(claims["sub"])
        user = await self.auth.storage.db.run(lambda c: user_rows.get_by_id(c, sub))
        if user is None or user.revoked_timestamp is not None:
            raise InvalidToken("The access token is invalid or has expired")
        scope = claims.get("scope")
        names = [str(s) for s in scope] if isinstance(scope, list) else []
        return oidc_userinfo.userinfo_claims(user, names)

    def id_token_subject(self, id_token_hint: str) -> str | None:
        """The ``sub`` of an ID token we issued (expired ones too: OIDC RP-Initiated
        Logout §2 accepts them as hints)."""
        claims = self.auth._verified(id_token_hint) if id_token_hint else None
        if claims is None or claims.get("token_type") != TokenType.ID.value:
            return None
        if (
            claims.get("iss") != self.auth.policy.issuer
            or claims.get("aud") != self.settings.client_id
        ):
            return None
        sub = claims.get("sub")
        return sub if isinstance(sub, str) and sub else None

    async def end_session(
        self,
        caller: CallerContext,
        *,
        post_logout_redirect_uri: str,
        state: str,
        hinted_subject: str | None,
    ) -> LoggedOut:
        """End the browser's session (its cookie), notify the back-channel, clear cookies."""
        if post_logout_redirect_uri and not self.redirect_allowed(post_logout_redirect_uri):
            raise InvalidRequest("invalid post_logout_redirect_uri")
        auth = self.auth
        who = await auth.authenticate(dataclasses.replace(caller, bearer_token=None))
        if who is not None and (hinted_subject is None or hinted_subject == who.user_id):
            await auth.sessions.delete(who.user_id, who.sid, who.nonce)
            if self.settings.backchannel_logout_uri:
                await enqueue_logout(auth, user_id=who.user_id, sid=who.sid)
        redirect = None
        if post_logout_redirect_uri:
            redirect = post_logout_redirect_uri
            if state:
                redirect = add_query(redirect, [("state", state)])
        return LoggedOut(redirect=redirect, cookies=auth.cookies.clear())

    def check_client(self, client_id: str, secret: str | None) -> bool | None:
        """None: no secret presented (a public client); else whether id and secret match.
        An unknown ``client_id`` without a secret is ``invalid_client``."""
        if secret is None:
            if not hmac.compare_digest(client_id.encode(), self.settings.client_id.encode()):
                raise InvalidClient("The client_id is invalid")
            return None
        return self.client_secret_ok(client_id, secret)


def _text(form: Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""
