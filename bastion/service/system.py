"""The real clock, randomness and ids that the runtime hands to ``core``, and the
build's version."""

from __future__ import annotations

import secrets
import time
import uuid
from importlib.metadata import PackageNotFoundError, version


def build_version() -> str:
    try:
        return version("bastion")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0"


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
