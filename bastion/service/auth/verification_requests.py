"""The verification-request effects of a flow run: a link's signed token and its request
row, created (``CreateVerificationRequest``) and loaded (``LoadVerificationRequest``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bastion.core.auth.claims import verification_token_claims
from bastion.core.auth.verification import VerificationRequest
from bastion.core.errors import Unauthenticated
from bastion.core.state_machines.effects import CreateVerificationRequest, LoadVerificationRequest
from bastion.core.state_machines.events import VerificationRequestLoaded
from bastion.storage import verification as requests

if TYPE_CHECKING:
    from bastion.service.auth.parts import AuthParts

__all__ = ["create_request", "load_request"]


async def create_request(auth: AuthParts, effect: CreateVerificationRequest) -> str:
    """The signed token of the link, its request row written (replacing an older one)."""
    policy = auth.policy
    claims = verification_token_claims(
        policy=policy,
        email=effect.email,
        identifier=effect.identifier.value,
        nonce=effect.nonce,
        redirect_uri=effect.redirect_uri,
        now=effect.issued_at,
    )
    claims["exp"] = effect.expires_at
    token = auth.signer.sign(claims)
    request = VerificationRequest(
        id=auth.ids.new_id(),
        identifier=effect.identifier.value,
        email=effect.email,
        nonce=effect.nonce,
        redirect_uri=effect.redirect_uri,
        expires_at=effect.expires_at,
    )
    now = int(auth.clock.now())
    await auth.storage.db.run(
        lambda conn: requests.replace(conn, request, token=token, now=now), write=True
    )
    return token


async def load_request(
    auth: AuthParts, effect: LoadVerificationRequest
) -> VerificationRequestLoaded:
    """The request row, by its token (with the token's claims when its signature holds) or by
    email and identifier."""
    db = auth.storage.db
    if effect.token is None:
        email, identifier = effect.email or "", str(effect.identifier or "")
        found = await db.run(lambda conn: requests.get_by_email(conn, email, identifier))
        return VerificationRequestLoaded(request=found)
    token = effect.token
    found = await db.run(lambda conn: requests.get_by_token(conn, token))
    if found is None:
        return VerificationRequestLoaded(request=None)
    try:
        claims: dict[str, Any] | None = auth.signer.verify(token)
    except Unauthenticated:  # a forged or garbled token proves nothing
        claims = None
    return VerificationRequestLoaded(request=found, claims=claims)
