"""A stored verification request: the row behind every emailed link."""

from __future__ import annotations

import dataclasses

__all__ = ["VerificationRequest"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerificationRequest:
    id: str
    #: ``basic_auth_signup``, ``magic_link_login``, ``update_email``, ``forgot_password`` ...
    identifier: str
    email: str
    nonce: str
    redirect_uri: str
    expires_at: int

    def is_expired(self, now: int) -> bool:
        return now >= self.expires_at
