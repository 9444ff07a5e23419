"""JWT signing and verification under every configured algorithm, and the attacks on it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jwt
from joserfc.jwk import RSAKey

from bastion.core.settings import settings_from_flags
from bastion.service.tokens import InvalidToken, TokenSigner
from tests.keys import pem_pair, rsa_pem_pair

BASE = {
    "admin-secret": "a",
    "client-id": "client-1",
    "client-secret": "s",
    "database-type": "sqlite",
    "database-url": "./x.db",
}


@pytest.fixture(scope="module")
def rsa_pem() -> tuple[str, str]:
    return rsa_pem_pair()


def _signer(jwt_type: str, rsa_pem: tuple[str, str]) -> TokenSigner:
    flags = {**BASE, "jwt-type": jwt_type}
    if jwt_type.startswith("HS"):
        flags["jwt-secret"] = "a-long-enough-shared-secret-for-hmac"
    elif jwt_type.startswith("RS"):
        flags["jwt-private-key"], flags["jwt-public-key"] = rsa_pem
    else:
        curve = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}[
            jwt_type
        ]
        flags["jwt-private-key"], flags["jwt-public-key"] = pem_pair(ec.generate_private_key(curve))
    return TokenSigner(settings_from_flags(flags))


ALGORITHMS = ["HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_round_trip_with_kid(algorithm: str, rsa_pem: tuple[str, str]) -> None:
    signer = _signer(algorithm, rsa_pem)
    token = signer.sign({"sub": "u1", "exp": 9999999999})
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    # HMAC keys are named by the client id; RSA/EC keys by their RFC 7638 thumbprint
    kid = "client-1" if algorithm.startswith("HS") else signer.jwks()["keys"][0]["kid"]
    assert header == {"alg": algorithm, "typ": "JWT", "kid": kid}
    assert signer.verify(token)["sub"] == "u1"
    jwks = signer.jwks()
    if algorithm.startswith("HS"):
        assert jwks == {"keys": []}
    else:
        (key,) = jwks["keys"]
        assert key["kid"] == kid != "client-1"
        assert key["alg"] == algorithm
        assert key["use"] == "sig"
        assert "d" not in key


def test_tampered_payload(rsa_pem: tuple[str, str]) -> None:
    signer = _signer("HS256", rsa_pem)
    head, _, sig = signer.sign({"sub": "u1"}).split(".")
    forged = base64.urlsafe_b64encode(json.dumps({"sub": "admin"}).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidToken):
        signer.verify(f"{head}.{forged}.{sig}")


def test_alg_none_refused(rsa_pem: tuple[str, str]) -> None:
    signer = _signer("HS256", rsa_pem)

    def b64(data: dict[str, str]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    with pytest.raises(InvalidToken):
        signer.verify(f"{b64({'alg': 'none', 'kid': 'client-1'})}.{b64({'sub': 'u1'})}.")


def test_hs_rs_confusion_refused(rsa_pem: tuple[str, str]) -> None:
    signer = _signer("RS256", rsa_pem)

    # The attacker signs HS256 with the server's public key as the HMAC secret.
    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    signing_input = (
        b64(json.dumps({"alg": "HS256", "kid": "client-1"}).encode())
        + "."
        + b64(json.dumps({"sub": "admin"}).encode())
    )
    mac = hmac.new(rsa_pem[1].encode(), signing_input.encode(), hashlib.sha256).digest()
    forged = f"{signing_input}.{b64(mac)}"
    with pytest.raises(InvalidToken):
        signer.verify(forged)


def test_other_key_and_unknown_kid_refused(rsa_pem: tuple[str, str]) -> None:
    signer = _signer("RS256", rsa_pem)
    other = RSAKey.generate_key(2048)
    foreign = jwt.encode(
        {"alg": "RS256", "kid": "client-1"}, {"sub": "u"}, other, algorithms=["RS256"]
    )
    with pytest.raises(InvalidToken):
        signer.verify(foreign)
    own_key = RSAKey.import_key(rsa_pem[0])
    wrong_kid = jwt.encode(
        {"alg": "RS256", "kid": "old-key"}, {"sub": "u"}, own_key, algorithms=["RS256"]
    )
    with pytest.raises(InvalidToken):
        signer.verify(wrong_kid)


def test_garbage_refused(rsa_pem: tuple[str, str]) -> None:
    signer = _signer("HS512", rsa_pem)
    for token in ("", "a.b", "a.b.c", "....", "eyJ.eyJ.sig"):
        with pytest.raises(InvalidToken):
            signer.verify(token)


def test_a_verified_token_is_remembered_never_its_forgeries(
    rsa_pem: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    signer = _signer("HS256", rsa_pem)
    token = signer.sign({"sub": "u1", "roles": ["user"]})
    first = signer.verify(token)
    first["sub"] = "changed by the caller"
    # the second use is answered from memory (the signature is not checked again) ...
    monkeypatch.setattr(jwt, "decode", None)
    assert signer.verify(token) == {"sub": "u1", "roles": ["user"]}
    # ... and a forgery is not a remembered token: its signature is checked (and fails)
    head, payload, sig = token.split(".")
    forged = base64.urlsafe_b64encode(json.dumps({"sub": "admin"}).encode()).rstrip(b"=")
    monkeypatch.undo()
    for bad in (f"{head}.{forged.decode()}.{sig}", f"{head}.{payload}.{sig[:-2]}AA"):
        with pytest.raises(InvalidToken):
            signer.verify(bad)


def test_the_remembered_tokens_are_bounded(
    rsa_pem: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bastion.service.tokens.VERIFIED_CACHE_ENTRIES", 3)
    signer = _signer("HS256", rsa_pem)
    tokens = [signer.sign({"sub": f"u{i}"}) for i in range(7)]
    for token in tokens:
        signer.verify(token)
        assert len(signer._verified) <= 3
    # a forgotten token still verifies (again, by its signature)
    assert signer.verify(tokens[0])["sub"] == "u0"
