"""Answers to ``GenerateCode`` and ``CheckCode``: the one-time codes of :mod:`core.auth.otp`.

Keep the key on the server side (derive it from a server secret with
:func:`core.auth.otp.derive_key`): only the keyed digest travels with a challenge.
"""

from __future__ import annotations

from bastion.core.auth import otp
from bastion.core.ports import Randomness
from bastion.core.state_machines.mfa_effects import (
    CheckCode,
    CodeChecked,
    CodeGenerated,
    GenerateCode,
)

__all__ = ["OtpCodes"]


class OtpCodes:
    def __init__(self, key: bytes, randomness: Randomness) -> None:
        if len(key) < 16:
            raise ValueError("the code key needs at least 16 bytes")
        self._key = key
        self._randomness = randomness

    def generate(self, effect: GenerateCode) -> CodeGenerated:
        """A fresh code for the challenge, and the digest to store in its place."""
        code = otp.new_code(self._randomness)
        return CodeGenerated(
            code=code, digest=otp.code_digest(self._key, effect.challenge_id, code)
        )

    def check(self, effect: CheckCode) -> CodeChecked:
        ok = otp.code_matches(self._key, effect.challenge_id, effect.code, effect.digest)
        return CodeChecked(ok=ok)
