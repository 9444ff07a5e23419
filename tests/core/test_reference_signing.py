"""The standard-library JwtSigner against joserfc: tokens made by either verify in the other,
and what must be refused is refused by ours (tampering, ``alg: none``, another algorithm)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest
from joserfc import jwt
from joserfc.errors import UnsupportedAlgorithmError
from joserfc.jwk import OctKey

from bastion.core.errors import Unauthenticated
from bastion.core.reference import JwtSigner

SECRET = "reference-signing-secret-0123456789abcdef"
CLAIMS: dict[str, Any] = {
    "sub": "user-1",
    "iat": 1_700_000_000,
    "exp": 1_700_000_900,
    "roles": ["user", "admin"],
    "name": "Zoë",
    "nested": {"a": 1},
}
ALGORITHMS = ("HS256", "HS384", "HS512")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict[str, Any], claims: dict[str, Any], key: bytes, digest: Any) -> str:
    """A token with any header, MACed with ``digest`` (or with no signature)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    mac = hmac.new(key, signing_input.encode(), digest).digest() if digest else b""
    return f"{signing_input}.{b64(mac)}"


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_ours_verify_in_joserfc_and_theirs_in_ours(alg: str) -> None:
    signer = JwtSigner(SECRET, algorithm=alg)
    key = OctKey.import_key(SECRET)
    assert signer.algorithm == alg
    ours = signer.sign(CLAIMS)
    decoded = jwt.decode(ours, key, algorithms=[alg])
    assert decoded.header == {"alg": alg, "typ": "JWT"}
    assert decoded.claims == CLAIMS
    theirs = jwt.encode({"alg": alg, "typ": "JWT"}, CLAIMS, key, algorithms=[alg])
    assert signer.verify(theirs) == CLAIMS


def test_bytes_secret_is_the_same_key_as_its_text() -> None:
    token = JwtSigner(SECRET.encode()).sign({"sub": "x"})
    assert JwtSigner(SECRET).verify(token) == {"sub": "x"}


def test_another_secret_is_refused() -> None:
    token = JwtSigner(SECRET).sign(CLAIMS)
    with pytest.raises(Unauthenticated):
        JwtSigner(SECRET + "-other").verify(token)


def tampered(token: str) -> list[str]:
    header, payload, signature = token.split(".")
    other_claims = b64(json.dumps({**CLAIMS, "sub": "admin"}).encode())
    flipped = signature[:5] + ("A" if signature[5] != "A" else "B") + signature[6:]
    return [
        f"{header}.{other_claims}.{signature}",  # another payload, the old MAC
        f"{header}.{payload}.{flipped}",  # another MAC
        f"{header}.{payload}.",  # no MAC
        f"{header}.{payload}",  # two segments
        f"{header}.{payload}.{signature}.{signature}",  # four
        f"{header}.{payload}.{signature}=",  # padded
        f"{header}.{payload}.{signature}\n",
        f" {token}",
        f"{header}.{payload}.{signature[:-1]}",  # cut short
        "",
        "not a token",
    ]


def test_tampered_tokens_are_refused() -> None:
    signer = JwtSigner(SECRET)
    token = signer.sign(CLAIMS)
    for bad in tampered(token):
        with pytest.raises(Unauthenticated):
            signer.verify(bad)


def test_a_signature_has_one_spelling() -> None:
    """The unused low bits of the last base64url character are zero: another character
    decoding to the same bytes is another token, and is refused."""
    signer = JwtSigner(SECRET)
    token = signer.sign(CLAIMS)  # a 32-byte MAC: 43 characters, 2 spare bits in the last
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    last = alphabet.index(token[-1])
    assert last % 4 == 0
    respelled = token[:-1] + alphabet[last + 1]
    with pytest.raises(Unauthenticated):
        signer.verify(respelled)


def test_alg_none_and_other_algorithms_are_refused() -> None:
    signer = JwtSigner(SECRET)
    key = SECRET.encode()
    refused = [
        forge({"alg": "none", "typ": "JWT"}, CLAIMS, key, None),
        forge({"alg": "None"}, CLAIMS, key, None),
        forge({"typ": "JWT"}, CLAIMS, key, hashlib.sha256),
        # a correct HS512 MAC, but the signer is HS256
        forge({"alg": "HS512", "typ": "JWT"}, CLAIMS, key, hashlib.sha512),
        # an HS256 MAC labelled HS512, and one labelled RS256 (the key-confusion attack)
        forge({"alg": "HS512"}, CLAIMS, key, hashlib.sha256),
        forge({"alg": "RS256"}, CLAIMS, key, hashlib.sha256),
        # an extension we must understand to accept the token
        forge({"alg": "HS256", "crit": ["exp"]}, CLAIMS, key, hashlib.sha256),
    ]
    for token in refused:
        with pytest.raises(Unauthenticated):
            signer.verify(token)
    # the same forging with the right header is accepted: the refusals above are the header's
    assert signer.verify(forge({"alg": "HS256"}, CLAIMS, key, hashlib.sha256)) == CLAIMS


def test_joserfc_refuses_what_ours_refuses_for_the_wrong_algorithm() -> None:
    token = JwtSigner(SECRET, algorithm="HS512").sign(CLAIMS)
    with pytest.raises(Unauthenticated):
        JwtSigner(SECRET, algorithm="HS256").verify(token)
    with pytest.raises(UnsupportedAlgorithmError):
        jwt.decode(token, OctKey.import_key(SECRET), algorithms=["HS256"])


@pytest.mark.parametrize("payload", [b"[1, 2]", b'"text"', b"not json", b"\xff\xfe"])
def test_a_payload_that_is_not_a_json_object_is_refused(payload: bytes) -> None:
    signer = JwtSigner(SECRET)
    header = b64(b'{"alg":"HS256","typ":"JWT"}')
    signing_input = f"{header}.{b64(payload)}"
    mac = hmac.new(SECRET.encode(), signing_input.encode(), hashlib.sha256).digest()
    with pytest.raises(Unauthenticated):
        signer.verify(f"{signing_input}.{b64(mac)}")


def test_weak_secrets_and_unknown_algorithms_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        JwtSigner("short")
    with pytest.raises(ValueError, match="algorithm"):
        JwtSigner(SECRET, algorithm="RS256")
    with pytest.raises(ValueError, match="algorithm"):
        JwtSigner(SECRET, algorithm="none")
