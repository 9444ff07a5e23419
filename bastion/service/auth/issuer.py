"""Minting a session: the sealed cookie value, access, ID and (offline_access) refresh token.

Claims come from :mod:`core.auth.claims`; this module adds ``sid`` (the session family,
see :mod:`service.auth.sessions`), runs the custom access-token script when one is
configured (its claims merged by ``core.auth.claims.merge_custom_claims``, so it can
never override ``sub``, ``exp``, ``iat``, ``iss``, ``aud`` or roles) and signs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bastion.core.auth import claims as claim_rules
from bastion.core.auth.policy import AuthPolicy
from bastion.core.auth.responses import IssuedTokens
from bastion.core.auth.user import User
from bastion.core.state_machines.effects import IssueTokens
from bastion.service.auth.cookies import SessionCookies
from bastion.service.tokens import TokenSigner

__all__ = ["CustomClaims", "TokenIssuer"]

#: ``(user API dict, claims so far) -> extra claims``; ``{}`` when the script fails.
CustomClaims = Callable[[dict[str, Any], dict[str, Any]], Awaitable[Mapping[str, Any]]]


class TokenIssuer:
    def __init__(
        self,
        policy: AuthPolicy,
        signer: TokenSigner,
        cookies: SessionCookies,
        custom: CustomClaims | None = None,
    ) -> None:
        self.policy = policy
        self.signer = signer
        self.cookies = cookies
        self.custom = custom

    async def _customised(self, user: User, claims: dict[str, Any]) -> dict[str, Any]:
        if self.custom is None:
            return claims
        extra = await self.custom(user.to_api_dict(), dict(claims))
        return claim_rules.merge_custom_claims(claims, extra, role_claim=self.policy.jwt_role_claim)

    async def mint(self, effect: IssueTokens, *, sid: str, now: int) -> IssuedTokens:
        policy, user = self.policy, effect.user
        common = {
            "policy": policy,
            "user": user,
            "roles": effect.roles,
            "login_method": effect.login_method,
            "nonce": effect.nonce,
            "now": now,
        }
        access_claims = claim_rules.access_token_claims(scope=effect.scope, **common)  # type: ignore[arg-type]
        access_claims = await self._customised(user, access_claims)
        access_claims["sid"] = sid
        access_token = self.signer.sign(access_claims)
        id_claims = claim_rules.id_token_claims(
            access_token=access_token,
            alg=self.signer.algorithm,
            oidc_nonce=effect.oidc_nonce,
            code=effect.code,
            auth_time=effect.auth_time,
            **common,  # type: ignore[arg-type]
        )
        id_claims = await self._customised(user, id_claims)
        id_claims["sid"] = sid
        refresh_token = None
        if effect.include_refresh_token:
            refresh_claims = claim_rules.refresh_token_claims(
                scope=effect.scope,
                auth_time=effect.auth_time,
                **common,  # type: ignore[arg-type]
            )
            refresh_claims["sid"] = sid
            refresh_token = self.signer.sign(refresh_claims)
        session = claim_rules.session_claims(
            user=user,
            roles=effect.roles,
            scope=effect.scope,
            login_method=effect.login_method,
            nonce=effect.nonce,
            now=now,
            auth_time=effect.auth_time,
        )
        session["sid"] = sid
        return IssuedTokens(
            nonce=effect.nonce,
            access_token=access_token,
            id_token=self.signer.sign(id_claims),
            refresh_token=refresh_token,
            session_token=self.cookies.seal(session),
            expires_in=claim_rules.expires_in(access_claims["exp"], now),
        )
