"""The HTTP side of one provider: the authorize URL, the code exchange and the profile.

authlib supplies the OAuth 2.0 primitives (RFC 6749 request building, RFC 7636 PKCE);
joserfc verifies ID tokens against the provider's published keys. The flow itself (state,
binding, account decisions) is ours. Every failure is a :class:`ProviderError` whose
message is safe to show the browser (never a secret, never the provider's raw body).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote

import httpx
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri, prepare_token_request
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from bastion.core.social import profile as profiles
from bastion.core.social.apple import AppleSigningKey
from bastion.core.social.id_token import id_token_problem
from bastion.core.social.pending import PendingLogin
from bastion.core.social.profile import SocialProfile
from bastion.core.social.providers import ClientAuth, ProfileSource, Provider
from bastion.service.social.apple import apple_client_secret
from bastion.service.social.config import ProviderConfig

__all__ = ["ProviderClient", "ProviderError"]

log = logging.getLogger("bastion.social")

#: Seconds for any one request to a provider.
PROVIDER_TIMEOUT = 15.0
_ID_TOKEN_ALGORITHMS = ["RS256", "ES256"]


class ProviderError(Exception):
    """The provider refused, failed or answered something we cannot trust."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ProviderClient:
    def __init__(self, config: ProviderConfig, callback_url: str) -> None:
        self.config = config
        self.callback_url = callback_url

    @property
    def provider(self) -> Provider:
        return self.config.provider

    # -- the browser's way out ------------------------------------------------------------

    def authorize_url(self, pending: PendingLogin, state: str) -> str:
        spec = self.config.spec
        extra: dict[str, str] = dict(spec.authorize_params)
        if spec.pkce and pending.code_verifier:
            extra["code_challenge"] = create_s256_code_challenge(pending.code_verifier)
            extra["code_challenge_method"] = "S256"
        if spec.nonce and pending.nonce:
            extra["nonce"] = pending.nonce
        if spec.response_mode:
            extra["response_mode"] = spec.response_mode
        return str(
            prepare_grant_uri(
                self.config.url("authorize"),
                self.config.client_id,
                "code",
                redirect_uri=self.callback_url,
                scope=list(self.config.scopes),
                state=state,
                **extra,
            )
        )

    # -- the way back -----------------------------------------------------------------------

    async def profile(
        self, code: str, pending: PendingLogin, form: Mapping[str, str], *, now: int
    ) -> SocialProfile:
        async with httpx.AsyncClient(
            timeout=PROVIDER_TIMEOUT, trust_env=False, follow_redirects=False
        ) as http:
            tokens = await self._exchange(http, code, pending, now)
            source = self.config.spec.profile_source
            if source is ProfileSource.ID_TOKEN:
                claims = await self._id_token_claims(http, tokens, pending, now)
                return self._from_claims(claims, form)
            access = tokens.get("access_token")
            if not isinstance(access, str) or not access:
                raise ProviderError("the provider returned no access token")
            return await self._from_api(http, source, access)

    async def _exchange(
        self, http: httpx.AsyncClient, code: str, pending: PendingLogin, now: int
    ) -> Mapping[str, Any]:
        config = self.config
        raw = config.client_secret
        secret = raw
        if isinstance(raw, AppleSigningKey):
            secret = apple_client_secret(
                raw, client_id=config.client_id, audience=config.issuer(), now=now
            )
        fields: dict[str, str] = {"code": code}
        if config.spec.pkce and pending.code_verifier:
            fields["code_verifier"] = pending.code_verifier
        headers = {"Accept": "application/json"}
        if config.spec.client_auth is ClientAuth.BASIC:
            pair = f"{quote(config.client_id, safe='')}:{quote(secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
            fields["client_id"] = config.client_id
        else:
            fields["client_id"] = config.client_id
            fields["client_secret"] = secret
        body = prepare_token_request("authorization_code", redirect_uri=self.callback_url, **fields)
        url = config.url("token")
        try:
            if config.spec.token_method == "GET":
                response = await http.get(url, params=dict(parse_qsl(body)), headers=headers)
            else:
                headers["Content-Type"] = "application/x-www-form-urlencoded"
                response = await http.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("token endpoint unreachable", extra={"provider": self.provider.value})
            raise ProviderError("the provider could not be reached") from exc
        tokens = _json_object(response)
        error = tokens.get("error") if tokens is not None else None
        if response.status_code != 200 or tokens is None or error:
            log.warning(
                "token exchange refused",
                extra={"provider": self.provider.value, "status": response.status_code},
            )
            detail = error if isinstance(error, str) and error.isidentifier() else "failed"
            raise ProviderError(f"token exchange failed: {detail}")
        return tokens

    async def _id_token_claims(
        self,
        http: httpx.AsyncClient,
        tokens: Mapping[str, Any],
        pending: PendingLogin,
        now: int,
    ) -> dict[str, Any]:
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise ProviderError("the provider returned no ID token")
        keys = await self._get_json(http, self.config.url("jwks"), None)
        try:
            decoded = jwt.decode(
                id_token, KeySet.import_key_set(keys), algorithms=_ID_TOKEN_ALGORITHMS
            )
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise ProviderError("the provider's ID token does not verify") from exc
        claims = dict(decoded.claims)
        tenant = claims.get("tid") if isinstance(claims.get("tid"), str) else None
        problem = id_token_problem(
            claims,
            issuer=self.config.issuer(tenant),
            client_id=self.config.client_id,
            nonce=pending.nonce if self.config.spec.nonce else None,
            now=now,
        )
        if problem is not None:
            raise ProviderError(f"the provider's ID token is invalid: {problem}")
        return claims

    def _from_claims(self, claims: Mapping[str, Any], form: Mapping[str, str]) -> SocialProfile:
        if self.provider is Provider.MICROSOFT:
            return _checked(lambda: profiles.from_microsoft(claims))
        if self.provider is Provider.APPLE:
            user: Any = None
            if form.get("user"):
                try:
                    user = json.loads(form["user"])
                except ValueError:
                    user = None
            return _checked(
                lambda: profiles.from_apple(claims, user if isinstance(user, dict) else None)
            )
        return _checked(lambda: profiles.from_oidc(claims))

    async def _from_api(
        self, http: httpx.AsyncClient, source: ProfileSource, access_token: str
    ) -> SocialProfile:
        url = self.config.url("profile")
        if source is ProfileSource.USERINFO:
            body = await self._get_json(http, url, access_token)
            return _checked(lambda: profiles.from_oidc(body))
        if source is ProfileSource.GITHUB:
            user = await self._get_json(http, url, access_token)
            emails = await self._get_json(http, self.config.url("emails"), access_token)
            return _checked(
                lambda: profiles.from_github(user, emails if isinstance(emails, list) else [])
            )
        if source is ProfileSource.FACEBOOK:
            fields = {"fields": "id,first_name,last_name,email,picture"}
            me = await self._get_json(http, url, access_token, params=fields)
            return _checked(lambda: profiles.from_facebook(me))
        if source is ProfileSource.DISCORD:
            body = await self._get_json(http, url, access_token)
            return _checked(lambda: profiles.from_discord(body))
        body = await self._get_json(http, url, access_token)
        return _checked(lambda: profiles.from_twitter(body))

    async def _get_json(
        self,
        http: httpx.AsyncClient,
        url: str,
        access_token: str | None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        headers = {"Accept": "application/json"}
        if access_token is not None:
            headers["Authorization"] = f"Bearer {access_token}"
        try:
            response = await http.get(url, headers=headers, params=params)
        except httpx.HTTPError as exc:
            raise ProviderError("the provider could not be reached") from exc
        if response.status_code != 200:
            log.warning(
                "provider API refused",
                extra={"provider": self.provider.value, "status": response.status_code},
            )
            raise ProviderError("the provider refused the profile request")
        try:
            return response.json()
        except ValueError as exc:
            raise ProviderError("the provider answered something other than JSON") from exc


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _checked(build: Any) -> SocialProfile:
    """A profile from the provider's data; one without the provider's user id (or data
    of the wrong shape) is refused."""
    try:
        found: SocialProfile = build()
    except (ValueError, AttributeError, TypeError) as exc:
        raise ProviderError("the provider's profile has no user id") from exc
    return found
