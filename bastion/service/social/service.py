"""Social login's two browser requests, on the shared service layer.

``begin`` (``GET /oauth_login/<provider>``) and ``finish`` (``/oauth_callback/<provider>``)
answer with a :class:`Redirect`. The pending login's rules are in
:mod:`core.social.pending`; the account rules in :mod:`core.state_machines.social_login`,
run by the same flow driver (and so the same session creation, webhooks, audit and
transactions) as password login.

Where the browser is sent back to (the validated ``redirect_uri``):

- success: ``access_token``, ``token_type=bearer``, ``expires_in``, ``id_token`` and the
  application's ``state`` in the query, as Authorizer's callback and ``/verify_email``
  do, plus the session cookies. A refresh token is never put in a URL (address bars,
  history and ``Referer`` keep URLs); with ``offline_access`` the application gets it
  from ``session`` or ``POST /oauth/token``.
- failure once the pending login is known: ``error`` (a short reason) and ``state``.
  Before that (unknown provider, bad ``redirect_uri``, unknown or expired ``state``) the
  answer is a JSON 400, since there is nowhere safe to send the browser.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
from collections.abc import Mapping

from bastion.core.auth.links import add_query
from bastion.core.errors import ClientError, InvalidArgument
from bastion.core.social.pending import PENDING_TTL, PendingLogin, binding_digest, binding_matches
from bastion.core.social.providers import Provider
from bastion.core.state_machines.social_login import SocialLoginMachine, SocialLoginRequested
from bastion.service.auth.driver import FlowRun
from bastion.service.auth.service import AuthService
from bastion.service.context import CallerContext, Cookie
from bastion.service.social.client import ProviderClient, ProviderError
from bastion.service.social.config import configured_providers

__all__ = ["BINDING_COOKIE", "Redirect", "SocialLogin"]

log = logging.getLogger("bastion.social")

#: The browser binding of a pending login (HttpOnly, path ``/oauth_callback``).
BINDING_COOKIE = "social_login"
UNKNOWN_PROVIDER = "unknown or unconfigured provider"
INVALID_STATE = "invalid or expired state"
_KEY = "social_state:"
#: Our own states are 43 characters; anything much longer is not one of them.
_MAX_STATE = 64
#: The application's state rides in the provider's URL and back in ours.
_MAX_APP_STATE = 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Redirect:
    location: str
    cookies: tuple[Cookie, ...] = ()


class SocialLogin:
    def __init__(self, auth: AuthService) -> None:
        self.auth = auth
        settings = auth.settings
        self.clients: dict[Provider, ProviderClient] = {
            provider: ProviderClient(config, f"{auth.policy.issuer}/oauth_callback/{provider}")
            for provider, config in configured_providers(settings).items()
        }
        self._secure = settings.app_cookie_secure

    def _client(self, name: str) -> ProviderClient:
        client = self.clients.get(Provider(name)) if name in set(Provider) else None
        if client is None:
            raise InvalidArgument(UNKNOWN_PROVIDER)
        return client

    def _binding_cookie(self, value: str, max_age: int) -> Cookie:
        # Apple posts the callback from its own site: only SameSite=None reaches us then,
        # and browsers take SameSite=None only with Secure.
        return Cookie(
            name=BINDING_COOKIE,
            value=value,
            max_age=max_age,
            secure=self._secure,
            same_site="None" if self._secure else "Lax",
            path="/oauth_callback",
        )

    # -- GET /oauth_login/<provider> ----------------------------------------------------------

    async def begin(self, name: str, args: Mapping[str, str], caller: CallerContext) -> Redirect:
        client = self._client(name)
        auth = self.auth
        wanted = args.get("redirect_uri") or f"{auth.policy.issuer}/app"
        redirect_uri = auth.redirect_uri(wanted) or wanted
        if len(args.get("state", "")) > _MAX_APP_STATE:
            raise InvalidArgument("state is too long")
        binding, state = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        spec = client.config.spec
        pending = PendingLogin(
            provider=client.provider,
            redirect_uri=redirect_uri,
            app_state=args.get("state", ""),
            roles=_split(args.get("roles", "")),
            scope=_split(args.get("scope", "")),
            binding_digest=binding_digest(binding),
            code_verifier=secrets.token_urlsafe(48) if spec.pkce else None,
            nonce=secrets.token_urlsafe(24) if spec.nonce else None,
            created_at=int(auth.clock.now()),
        )
        await auth.storage.memory.set(_KEY + state, pending.to_json(), ttl=PENDING_TTL)
        return Redirect(
            client.authorize_url(pending, state),
            (self._binding_cookie(binding, PENDING_TTL),),
        )

    # -- GET or POST /oauth_callback/<provider> -----------------------------------------------

    async def finish(self, name: str, params: Mapping[str, str], caller: CallerContext) -> Redirect:
        client = self._client(name)
        state = params.get("state", "")
        known = 0 < len(state) <= _MAX_STATE
        raw = await self.auth.storage.memory.take(_KEY + state) if known else None
        if raw is None:
            raise InvalidArgument(INVALID_STATE)
        pending = PendingLogin.from_json(raw)
        cleared = (self._binding_cookie("", 0),)
        bound = binding_matches(pending, caller.cookies.get(BINDING_COOKIE))
        if pending.provider is not client.provider or not bound:
            return self._failed(pending, INVALID_STATE, cleared)
        if params.get("error"):
            # The person declined, or the provider refused the request.
            error = params["error"]
            reason = error if error.isidentifier() else "access_denied"
            return self._failed(pending, reason, cleared)
        code = params.get("code", "")
        if not code:
            return self._failed(pending, "the provider returned no code", cleared)
        try:
            profile = await client.profile(code, pending, params, now=int(self.auth.clock.now()))
        except ProviderError as error:
            return self._failed(pending, error.message, cleared)
        event = SocialLoginRequested(
            provider=client.provider,
            profile=profile,
            roles=pending.roles,
            scope=pending.scope,
            state=pending.app_state or None,
        )
        run = FlowRun(self.auth, caller)
        try:
            result = await run.run(SocialLoginMachine(self.auth.env), event)
        except ClientError as error:
            return self._failed(pending, error.message, cleared)
        body = result.to_api_dict()
        location = add_query(
            pending.redirect_uri,
            [
                ("access_token", body.get("access_token") or ""),
                ("token_type", "bearer"),
                ("expires_in", str(body.get("expires_in") or "")),
                ("id_token", body.get("id_token") or ""),
                ("state", pending.app_state),
            ],
        )
        return Redirect(location, (*cleared, *run.cookies))

    @staticmethod
    def _failed(pending: PendingLogin, reason: str, cookies: tuple[Cookie, ...]) -> Redirect:
        log.info("social login failed", extra={"provider": pending.provider.value})
        params = [("error", reason), ("state", pending.app_state)]
        return Redirect(add_query(pending.redirect_uri, params), cookies)


def _split(value: str) -> tuple[str, ...]:
    return tuple(part for part in value.replace(",", " ").split() if part)
