"""Answering ``IssueTokens``: the token set a flow asks for, signed by a TokenSigner.

The claims are :mod:`core.auth.claims`', so the tokens read like the server's; ``sid``
names the session family (the first login's nonce, kept across refreshes). The server
encrypts its ``session_token``; here it is signed, which is enough for a cookie the
driver itself reads back (do not put it where the claims must stay private).
"""

from __future__ import annotations

from bastion.core.auth import claims as rules
from bastion.core.auth.policy import AuthPolicy
from bastion.core.auth.responses import IssuedTokens
from bastion.core.ports import TokenSigner
from bastion.core.state_machines.effects import IssueTokens

__all__ = ["mint_tokens"]


def mint_tokens(
    effect: IssueTokens, *, policy: AuthPolicy, signer: TokenSigner, now: int, sid: str
) -> IssuedTokens:
    user = effect.user
    roles, login_method = effect.roles, effect.login_method
    access = rules.access_token_claims(
        policy=policy,
        user=user,
        roles=roles,
        scope=effect.scope,
        login_method=login_method,
        nonce=effect.nonce,
        now=now,
    )
    access["sid"] = sid
    access_token = signer.sign(access)
    id_claims = rules.id_token_claims(
        policy=policy,
        user=user,
        roles=roles,
        login_method=login_method,
        nonce=effect.nonce,
        now=now,
        access_token=access_token,
        alg=signer.algorithm,
        oidc_nonce=effect.oidc_nonce,
        code=effect.code,
        auth_time=effect.auth_time,
    )
    id_claims["sid"] = sid
    refresh_token = None
    if effect.include_refresh_token:
        refresh = rules.refresh_token_claims(
            policy=policy,
            user=user,
            roles=roles,
            login_method=login_method,
            scope=effect.scope,
            nonce=effect.nonce,
            now=now,
            auth_time=effect.auth_time,
        )
        refresh["sid"] = sid
        refresh_token = signer.sign(refresh)
    session = rules.session_claims(
        user=user,
        roles=roles,
        scope=effect.scope,
        login_method=login_method,
        nonce=effect.nonce,
        now=now,
        auth_time=effect.auth_time,
    )
    session["sid"] = sid
    return IssuedTokens(
        nonce=effect.nonce,
        access_token=access_token,
        id_token=signer.sign(id_claims),
        refresh_token=refresh_token,
        session_token=signer.sign(session),
        expires_in=rules.expires_in(access["exp"], now),
    )
