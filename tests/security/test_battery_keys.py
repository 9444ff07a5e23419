"""Signing keys beyond HS256 (second security battery, the cases not tried at first):
ES256 and HS512 deployments, a rotated key kept as the secondary, and the session
cookie's domain. Each forgery differs from an accepted token in one way."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey

from tests.dbfixtures import fresh_sqlite_url
from tests.keys import pem_pair
from tests.security.test_battery_tokens import b64, hs256, parts, refused
from tests.server.harness import ServerProcess, base_flags, free_port, running

PASSWORD = "Keys!battery1"
HS512_SECRET = "an-hs512-secret-that-is-long-enough-for-sha512-keys-0123456789"


def p256_pem_pair() -> tuple[str, str]:
    return pem_pair(ec.generate_private_key(ec.SECP256R1()))


def without_jwt(flags: list[str]) -> list[str]:
    return [f for f in flags if not f.startswith("--jwt-")]


def signed_up(server: ServerProcess) -> str:
    """A fresh user's access token (verification is off: sign-up signs in)."""
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http:
        email = f"keys-{time.time_ns()}@example.com"
        body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
        answer = http.post("/v1/signup", json=body)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def accepted(server: ServerProcess, token: str) -> None:
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http:
        profile = http.get("/v1/profile", headers={"authorization": f"Bearer {token}"})
    assert profile.status_code == 200, profile.text


def es256(header: dict[str, Any], claims: dict[str, Any], private_pem: str) -> str:
    return jwt.encode({**header, "alg": "ES256"}, claims, ECKey.import_key(private_pem))


# -- ES256, with a rotated key as the secondary -------------------------------------------------


@pytest.fixture(scope="module")
def es_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An ES256 deployment whose key A was rotated out: it ran on A and issued a token,
    then restarted on key B with A kept as the secondary (same database)."""
    tmp: Path = tmp_path_factory.mktemp("es256")
    (new_private, new_public), (old_private, old_public) = p256_pem_pair(), p256_pem_pair()
    database = without_jwt(base_flags("sqlite", fresh_sqlite_url(tmp)))
    before = [
        *database,
        "--jwt-type=ES256",
        f"--jwt-private-key={old_private}",
        f"--jwt-public-key={old_public}",
    ]
    port = free_port()  # the issuer is --url: the same before and after
    with running(before, tmp, name="es256-before", http_port=port) as server:
        old_token = signed_up(server)
    after = [
        *database,
        "--jwt-type=ES256",
        f"--jwt-private-key={new_private}",
        f"--jwt-public-key={new_public}",
        "--jwt-secondary-type=ES256",
        f"--jwt-secondary-private-key={old_private}",
        f"--jwt-secondary-public-key={old_public}",
    ]
    with running(after, tmp, http_port=port) as server:
        server.keys = {"old": (old_private, old_public), "new": (new_private, new_public)}  # type: ignore[attr-defined]
        server.old_token = old_token  # type: ignore[attr-defined]
        yield server


def test_es256_tokens_carry_the_primary_key_and_are_accepted(es_server: ServerProcess) -> None:
    token = signed_up(es_server)
    header, _ = parts(token)
    assert header["alg"] == "ES256"
    with httpx.Client(base_url=es_server.url, timeout=30) as http:
        kids = {k["kid"]: k for k in http.get("/.well-known/jwks.json").json()["keys"]}
    assert header["kid"] in kids
    # Both keys are published (relying parties verify old tokens by kid); neither has "d".
    assert len(kids) == 2
    assert all("d" not in key for key in kids.values())
    accepted(es_server, token)


def test_a_token_signed_by_the_rotated_key_is_still_accepted(es_server: ServerProcess) -> None:
    old_token: str = es_server.old_token  # type: ignore[attr-defined]
    header, _ = parts(old_token)
    with httpx.Client(base_url=es_server.url, timeout=30) as http:
        kids = [k["kid"] for k in http.get("/.well-known/jwks.json").json()["keys"]]
    assert header["kid"] in kids
    assert header["kid"] != parts(signed_up(es_server))[0]["kid"]
    accepted(es_server, old_token)


def test_es256_forgeries_are_refused(es_server: ServerProcess) -> None:
    token = signed_up(es_server)
    header, claims = parts(token)
    signature = token.split(".")[2]
    stranger_private, _ = p256_pem_pair()
    _, new_public = es_server.keys["new"]  # type: ignore[attr-defined]
    _, old_public = es_server.keys["old"]  # type: ignore[attr-defined]
    forgeries = {
        "a stranger's EC key, the primary's kid": es256(header, claims, stranger_private),
        "a stranger's EC key, no kid": es256({"typ": "JWT"}, claims, stranger_private),
        "HS256 keyed with the primary's public PEM": hs256(
            {**header, "alg": "HS256"}, claims, new_public.encode()
        ),
        "HS256 keyed with the secondary's public PEM": hs256(
            {**header, "alg": "HS256"}, claims, old_public.encode()
        ),
        "the signature of another token": ".".join(
            [token.split(".")[0], b64(json.dumps({**claims, "sub": "x"}).encode()), signature]
        ),
        "expired, signed right": es256(
            header,
            {**claims, "exp": int(time.time()) - 60},
            es_server.keys["new"][0],  # type: ignore[attr-defined]
        ),
    }
    for name, forged in forgeries.items():
        try:
            refused(es_server, forged)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


# -- HS512, and the session cookie's domain ------------------------------------------------------


@pytest.fixture(scope="module")
def hs512_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("hs512")
    port = free_port()
    flags = [
        *without_jwt(base_flags("sqlite", fresh_sqlite_url(tmp))),
        "--jwt-type=HS512",
        f"--jwt-secret={HS512_SECRET}",
        f"--url=http://auth.example.test:{port}",
        f"--allowed-origins=http://127.0.0.1:{port},http://auth.example.test:{port}",
    ]
    with running(flags, tmp, http_port=port) as server:
        yield server


def test_hs512_tokens_refuse_a_weaker_or_foreign_algorithm(hs512_server: ServerProcess) -> None:
    token = signed_up(hs512_server)
    header, claims = parts(token)
    assert header["alg"] == "HS512"
    accepted(hs512_server, token)
    key = HS512_SECRET.encode()
    for name, forged in {
        "HS256 with the same secret": hs256({**header, "alg": "HS256"}, claims, key),
        "HS384 with the same secret": jwt.encode(
            {**header, "alg": "HS384"}, claims, OctKey.import_key(key), algorithms=["HS384"]
        ),
        "HS512 with another secret": jwt.encode(
            header, claims, OctKey.import_key(b"another-secret-" * 5), algorithms=["HS512"]
        ),
    }.items():
        try:
            refused(hs512_server, forged)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


def test_the_session_cookie_domain_comes_from_url_never_the_request(
    hs512_server: ServerProcess,
) -> None:
    """Host and X-Forwarded-Host are the caller's words: a cookie scoped by them could be
    planted for (or read by) a domain the operator never named."""
    email = f"domain-{time.time_ns()}@example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    origin = hs512_server.url
    with httpx.Client(base_url=hs512_server.url, timeout=30) as http:
        assert http.post("/v1/signup", json=body, headers={"origin": origin}).is_success
        login = http.post(
            "/v1/login",
            json={"email": email, "password": PASSWORD},
            headers={
                "origin": origin,
                "host": "attacker.example",
                "x-forwarded-host": "attacker.example",
            },
        )
    assert login.status_code == 200, login.text
    cookies = [c.lower() for c in login.headers.get_list("set-cookie")]
    domain_cookie = [c for c in cookies if c.startswith("cookie_session_domain=")]
    assert domain_cookie, cookies
    assert "domain=example.test" in domain_cookie[0], cookies
    assert not any("attacker" in c for c in cookies), cookies
