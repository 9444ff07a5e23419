"""Emailed and texted codes: 6 uniform digits, a keyed digest bound to the challenge,
constant-time checks, documented lifetimes."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bastion.core.auth import otp

KEY = otp.derive_key("jwt-secret")


@dataclasses.dataclass
class ScriptedRandomness:
    """Answers ``randbelow`` from a script, and records what was asked."""

    values: list[int]
    asked: list[int] = dataclasses.field(default_factory=list)

    def randbelow(self, n: int) -> int:
        self.asked.append(n)
        return self.values.pop(0)

    def token_bytes(self, n: int) -> bytes:
        return bytes(n)


def test_codes_are_six_digits_drawn_uniformly_below_a_million() -> None:
    randomness = ScriptedRandomness([0, 42, 999_999])
    assert [otp.new_code(randomness) for _ in range(3)] == ["000000", "000042", "999999"]
    assert randomness.asked == [1_000_000] * 3


def test_real_randomness_gives_digit_codes() -> None:
    class Seeded:
        rng = random.Random(7)

        def randbelow(self, n: int) -> int:
            return self.rng.randrange(n)

        def token_bytes(self, n: int) -> bytes:
            return self.rng.randbytes(n)

    codes = {otp.new_code(Seeded()) for _ in range(200)}
    assert all(len(c) == 6 and c.isdigit() for c in codes)
    assert len(codes) > 190


def test_the_digest_is_hmac_sha256_of_challenge_and_code() -> None:
    expected = hmac.new(KEY, b"ch-1:123456", hashlib.sha256).hexdigest()
    assert otp.code_digest(KEY, "ch-1", "123456") == expected
    assert otp.code_digest(KEY, "ch-1", "123 456") == expected
    assert "123456" not in expected


def test_the_key_is_derived_not_the_secret_itself() -> None:
    assert hmac.new(b"jwt-secret", b"bastion/otp/v1", hashlib.sha256).digest() == KEY
    assert otp.derive_key("jwt-secret", b"other purpose") != KEY
    assert otp.derive_key(b"jwt-secret") == KEY
    with pytest.raises(ValueError, match="must not be empty"):
        otp.derive_key("")


def test_code_matches() -> None:
    digest = otp.code_digest(KEY, "ch-1", "123456")
    assert otp.code_matches(KEY, "ch-1", "123456", digest)
    assert otp.code_matches(KEY, "ch-1", " 123-456 ", digest)
    assert not otp.code_matches(KEY, "ch-1", "123457", digest)
    assert not otp.code_matches(KEY, "ch-2", "123456", digest), "bound to its challenge"
    assert not otp.code_matches(otp.derive_key("other"), "ch-1", "123456", digest)
    for malformed in ("", "12345", "1234567", "12345a", "١٢٣٤٥٦"):
        assert not otp.code_matches(KEY, "ch-1", malformed, digest)
    with pytest.raises(ValueError, match="challenge id"):
        otp.code_digest(KEY, "", "123456")


@given(code=st.from_regex(r"\A[0-9]{6}\Z"), other=st.from_regex(r"\A[0-9]{6}\Z"))
def test_only_the_issued_code_matches(code: str, other: str) -> None:
    digest = otp.code_digest(KEY, "ch", code)
    assert otp.code_matches(KEY, "ch", other, digest) is (code == other)


def test_documented_lifetimes_and_limits() -> None:
    assert otp.OTP_TTL == 300
    assert otp.PHONE_VERIFICATION_TTL == 600
    assert otp.MAX_ATTEMPTS == 5
    assert otp.RESEND_INTERVAL == 30
    assert otp.MAX_SENDS == 5
