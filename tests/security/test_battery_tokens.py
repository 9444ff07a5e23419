"""Forged and stale tokens: each must be refused wherever a token is accepted (here: the
profile by bearer, and validate_jwt_token)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.keys import rsa_pem_pair
from tests.security.conftest import Deployment, victim
from tests.server.harness import ServerProcess, base_flags, running

SECRET = "test-jwt-secret-of-sufficient-length"  # the battery deployments' --jwt-secret


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def hs256(header: dict[str, Any], claims: dict[str, Any], key: bytes) -> str:
    def part(value: dict[str, Any]) -> str:
        return b64(json.dumps(value, separators=(",", ":")).encode())

    signing_input = f"{part(header)}.{part(claims)}"
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, claims, _ = token.split(".")
    return unb64(header), unb64(claims)


def refused(deployment: Deployment | ServerProcess, token: str) -> None:
    url = deployment.url
    with httpx.Client(base_url=url, headers={"origin": url}, timeout=30) as http:
        profile = http.get("/v1/profile", headers={"authorization": f"Bearer {token}"})
        checked = http.post(
            "/v1/validate_jwt_token", json={"token_type": "access_token", "token": token}
        )
    assert profile.status_code == 401, profile.text
    assert checked.status_code != 200 or checked.json().get("is_valid") is False, checked.text


def test_the_real_token_is_accepted(deployment: Deployment) -> None:
    """The baseline: the forgeries below differ from an accepted token in one way each."""
    user = victim(deployment)
    header, claims = parts(user.access_token)
    assert hs256(header, claims, SECRET.encode()).split(".")[:2] == user.access_token.split(".")[:2]
    with deployment.http() as http:
        again = hs256(header, claims, SECRET.encode())
        answer = http.get("/v1/profile", headers={"authorization": f"Bearer {again}"})
    assert answer.status_code == 200


def forgeries(token: str) -> Iterator[tuple[str, str]]:
    header, claims = parts(token)
    key = SECRET.encode()
    unsigned = f"{b64(json.dumps({**header, 'alg': 'none'}).encode())}.{token.split('.')[1]}."
    yield "alg none", unsigned
    yield "alg none, signature kept", unsigned + token.split(".")[2]
    yield "wrong kid", hs256({**header, "kid": "someone-else"}, claims, key)
    yield "expired", hs256(header, {**claims, "exp": int(time.time()) - 60}, key)
    yield "not yet valid", hs256(header, {**claims, "nbf": int(time.time()) + 3600}, key)
    tampered = token.split(".")
    tampered[1] = b64(json.dumps({**claims, "roles": ["admin"]}).encode())
    yield "tampered claims", ".".join(tampered)
    yield "another issuer", hs256(header, {**claims, "iss": "https://other.example"}, key)
    yield "another client", hs256(header, {**claims, "aud": "another-client"}, key)
    yield "another key", hs256(header, claims, b"not-the-deployments-secret-at-all")
    yield "an id token as access", hs256(header, {**claims, "token_type": "id_token"}, key)


def test_forged_and_stale_tokens_are_refused(deployment: Deployment) -> None:
    user = victim(deployment)
    for name, token in forgeries(user.access_token):
        try:
            refused(deployment, token)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None


@pytest.fixture(scope="module")
def rs256_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("rs256")
    private, public = rsa_pem_pair()
    flags = [
        *(f for f in base_flags("sqlite", fresh_sqlite_url(tmp)) if not f.startswith("--jwt-")),
        "--jwt-type=RS256",
        f"--jwt-private-key={private}",
        f"--jwt-public-key={public}",
    ]
    with running(flags, tmp) as server:
        server.public_pem = public  # type: ignore[attr-defined]
        yield server


def test_hs256_signed_with_the_public_key_is_refused(rs256_server: ServerProcess) -> None:
    """Algorithm confusion: the RS256 public key (published) used as an HMAC secret."""
    with httpx.Client(
        base_url=rs256_server.url, headers={"origin": rs256_server.url}, timeout=30
    ) as http:
        email = f"rs-{time.time_ns()}@example.com"
        body = {"email": email, "password": "Battery!pass1", "confirm_password": "Battery!pass1"}
        token = http.post("/v1/signup", json=body).json()["access_token"]
        header, claims = parts(token)
        assert http.get("/v1/profile", headers={"authorization": f"Bearer {token}"}).is_success
    public: str = rs256_server.public_pem  # type: ignore[attr-defined]
    stripped = "".join(public.strip().splitlines()[1:-1])
    der = base64.b64decode(stripped)
    for key in (public.encode(), stripped.encode(), der):
        refused(rs256_server, hs256({**header, "alg": "HS256"}, claims, key))
