"""The real clock, randomness and ids that the runtime hands to ``core``."""

from __future__ import annotations

import secrets
import time
import uuid


class SystemClock:
    def now(self) -> float:
        return time.time()


class SystemRandom:
    def token_bytes(self, n: int) -> bytes:
        return secrets.token_bytes(n)

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(n)


class SystemIds:
    def new_id(self) -> str:
        return str(uuid.uuid4())
