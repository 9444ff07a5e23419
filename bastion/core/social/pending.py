"""The social login between ``/oauth_login`` and ``/oauth_callback``.

Rules / theory of operation
---------------------------
1. ``/oauth_login`` draws two random values: the ``state`` sent to the provider and a
   browser binding set as an HttpOnly cookie (path ``/oauth_callback``). The memory store
   keeps :class:`PendingLogin` under ``state`` for :data:`PENDING_TTL` seconds with the
   SHA-256 of the binding, never the binding itself. Any server process sharing the store
   can finish the login.
2. The callback takes (reads and deletes) the pending login by ``state``: each one is
   used at most once. Unknown or expired ``state`` has no redirect target to report to.
3. The binding cookie must hash to the stored digest (constant-time compare) and the
   pending login must be for the provider of the callback URL, or nothing happens: a
   callback replayed into another browser, or forged by a page that started its own
   login, finds no match (RFC 6749 10.12, login CSRF).
4. The PKCE verifier and the OpenID nonce stay server-side; the provider sees only the
   challenge and the nonce.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from bastion.core.social.providers import Provider

__all__ = ["PENDING_TTL", "PendingLogin", "binding_digest", "binding_matches"]

#: Ten minutes to sign in at the provider (the reference's authorize state lives as long).
PENDING_TTL = 600


def binding_digest(binding: str) -> str:
    return hashlib.sha256(binding.encode()).hexdigest()


def binding_matches(pending: PendingLogin, presented: str | None) -> bool:
    if not presented:
        return False
    return hmac.compare_digest(binding_digest(presented), pending.binding_digest)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PendingLogin:
    provider: Provider
    #: where the browser goes afterwards (already checked against --allowed-origins)
    redirect_uri: str
    #: the application's own ``state``, handed back on the redirect
    app_state: str = ""
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    binding_digest: str
    code_verifier: str | None = dataclasses.field(default=None, repr=False)
    nonce: str | None = None
    created_at: int

    def to_json(self) -> bytes:
        data = dataclasses.asdict(self)
        data["provider"] = self.provider.value
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> PendingLogin:
        data: Mapping[str, Any] = json.loads(raw)
        return cls(
            provider=Provider(data["provider"]),
            redirect_uri=str(data["redirect_uri"]),
            app_state=str(data.get("app_state") or ""),
            roles=tuple(data.get("roles") or ()),
            scope=tuple(data.get("scope") or ()),
            binding_digest=str(data["binding_digest"]),
            code_verifier=data.get("code_verifier"),
            nonce=data.get("nonce"),
            created_at=int(data["created_at"]),
        )
