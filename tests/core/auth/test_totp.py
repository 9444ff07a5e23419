"""Authenticator apps: RFC 6238 codes (+-1 step, never twice), enrolment URI, recovery
codes, and the sealed secret at rest."""

from __future__ import annotations

import base64
import random
import urllib.parse

import pyotp
import pytest

from bastion.core.auth import totp
from bastion.core.auth.qr import png_base64

NOW = 1_700_000_000
STEP = NOW // 30
SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"


class Seeded:
    def __init__(self, seed: int = 1) -> None:
        self.rng = random.Random(seed)

    def randbelow(self, n: int) -> int:
        return self.rng.randrange(n)

    def token_bytes(self, n: int) -> bytes:
        return self.rng.randbytes(n)


def code_at(step: int, secret: str = SECRET) -> str:
    return pyotp.TOTP(secret).at(step * 30)


def test_rfc6238_reference_vector() -> None:
    # RFC 6238 appendix B, SHA-1, T = 59 s: 94287082 (8 digits); 6 digits keep the tail.
    secret = base64.b32encode(b"12345678901234567890").decode()
    assert totp.matching_step(secret, "287082", now=59, last_used_step=None) == 1


@pytest.mark.parametrize("offset", [-1, 0, 1])
def test_a_code_is_accepted_one_step_either_side(offset: int) -> None:
    found = totp.matching_step(SECRET, code_at(STEP + offset), now=NOW, last_used_step=None)
    assert found == STEP + offset


@pytest.mark.parametrize("offset", [-3, -2, 2, 3])
def test_a_code_further_away_is_refused(offset: int) -> None:
    assert totp.matching_step(SECRET, code_at(STEP + offset), now=NOW, last_used_step=None) is None


def test_a_code_accepted_once_is_refused_in_its_window() -> None:
    code = code_at(STEP)
    step = totp.matching_step(SECRET, code, now=NOW, last_used_step=None)
    assert step == STEP
    for later in (NOW, NOW + 15, NOW + 29, NOW + 30, NOW + 59):
        assert totp.matching_step(SECRET, code, now=later, last_used_step=step) is None
    # an older step's code is refused once a newer one was used
    assert totp.matching_step(SECRET, code_at(STEP - 1), now=NOW, last_used_step=STEP) is None
    # the next step's code is still fine
    assert totp.matching_step(SECRET, code_at(STEP + 1), now=NOW, last_used_step=STEP) == STEP + 1


@pytest.mark.parametrize("code", ["", "12345", "1234567", "abcdef", "12 34 5"])
def test_malformed_codes_are_refused(code: str) -> None:
    assert totp.matching_step(SECRET, code, now=NOW, last_used_step=None) is None


def test_another_secret_does_not_match() -> None:
    other = totp.new_secret(Seeded())  # seeded: its codes around NOW differ from SECRET's
    assert totp.matching_step(other, code_at(STEP), now=NOW, last_used_step=None) is None
    assert totp.matching_step(SECRET, code_at(STEP, other), now=NOW, last_used_step=None) is None


def test_secrets_are_160_bit_base32_from_the_given_randomness() -> None:
    secret = totp.new_secret(Seeded(3))
    assert len(base64.b32decode(secret)) == 20
    assert secret == totp.new_secret(Seeded(3))
    assert secret != totp.new_secret(Seeded(4))


def test_provisioning_uri_and_qr_image() -> None:
    uri = totp.provisioning_uri(SECRET, account="ann@example.com", issuer="Acme Inc")
    parts = urllib.parse.urlsplit(uri)
    assert (parts.scheme, parts.netloc) == ("otpauth", "totp")
    assert urllib.parse.unquote(parts.path) == "/Acme Inc:ann@example.com"
    query = urllib.parse.parse_qs(parts.query)
    assert query["secret"] == [SECRET]
    assert query["issuer"] == ["Acme Inc"]
    image = base64.b64decode(png_base64(uri), validate=True)
    assert image.startswith(b"\x89PNG\r\n\x1a\n")
    assert png_base64(uri) == png_base64(uri)
    assert png_base64(uri) != png_base64(uri + "x")


def test_recovery_codes_are_distinct_and_each_matches_its_digest_once_stored() -> None:
    codes = totp.new_recovery_codes(Seeded())
    assert len(codes) == totp.RECOVERY_CODE_COUNT == 10
    assert len(set(codes)) == 10
    for code in codes:
        groups = code.split("-")
        assert [len(g) for g in groups] == [5, 5, 5, 5]
    digests = tuple(totp.recovery_digest(c) for c in codes)
    assert totp.find_recovery_code(codes[3], digests) == digests[3]
    assert totp.find_recovery_code(codes[3].lower().replace("-", " "), digests) == digests[3]
    remaining = digests[:3] + digests[4:]
    assert totp.find_recovery_code(codes[3], remaining) is None, "each code works once"
    assert totp.find_recovery_code("nope", digests) is None
    assert all(code not in "".join(digests) for code in codes)


def test_authenticator_value() -> None:
    found = totp.Authenticator(user_id="u", secret=SECRET)
    assert SECRET not in repr(found)
    with pytest.raises(ValueError, match="user and a secret"):
        totp.Authenticator(user_id="u", secret="")
