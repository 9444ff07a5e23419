"""OpenID Connect Back-Channel Logout 1.0: ``--backchannel-logout-uri``.

When a session ends through ``/logout``, a signed logout token (§2.4: ``iss``, ``aud``,
``iat``, ``exp``, ``jti``, ``sub``, ``sid``, the back-channel ``events`` member, never a
``nonce``) is queued in the transactional outbox and POSTed as ``logout_token`` (form
encoded, §2.5) with retries; a 4xx answer other than 429 is final.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

import httpx

from bastion.core.settings import Settings
from bastion.service.outbox import Handler, PermanentFailure
from bastion.storage.outbox import OutboxItem, enqueue

if TYPE_CHECKING:
    from bastion.service.auth.service import AuthService

__all__ = ["BACKCHANNEL_EVENT", "KIND", "backchannel_handlers", "enqueue_logout"]

KIND = "backchannel_logout"
BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"
#: a logout token is only meant to be used at once (§2.4 recommends a short lifetime)
LOGOUT_TOKEN_TTL = 120


async def enqueue_logout(auth: AuthService, *, user_id: str, sid: str) -> None:
    now = int(time.time())
    claims = {
        "iss": auth.policy.issuer,
        "aud": auth.settings.client_id,
        "iat": now,
        "exp": now + LOGOUT_TOKEN_TTL,
        "jti": str(uuid.uuid4()),
        "sub": user_id,
        "sid": sid,
        "events": {BACKCHANNEL_EVENT: {}},
    }
    payload = {
        "uri": auth.settings.backchannel_logout_uri,
        "logout_token": auth.signer.sign(claims),
    }
    await auth.storage.db.run(lambda conn: enqueue(conn, KIND, payload, now=now), write=True)


def backchannel_handlers(settings: Settings) -> dict[str, Handler]:
    if not settings.backchannel_logout_uri:
        return {}

    async def post_logout_token(item: OutboxItem) -> None:
        async with httpx.AsyncClient(trust_env=False, follow_redirects=False) as client:
            answer = await client.post(
                str(item.payload["uri"]),
                data={"logout_token": str(item.payload["logout_token"])},
                headers={"Cache-Control": "no-store"},
            )
        if answer.is_success:
            return
        if 400 <= answer.status_code < 500 and answer.status_code != 429:
            raise PermanentFailure(f"logout endpoint answered {answer.status_code}")
        raise RuntimeError(f"logout endpoint answered {answer.status_code}")

    return {KIND: post_logout_token}
