"""Key rotation with ``--jwt-secondary-*``: a token signed with the old key stays valid.

Server 1 signs with RSA key A. Server 2 (same database, so the same sessions) signs with
key B and keeps A as the secondary: the old access token still validates and introspects,
the old ID token still verifies against the served JWKS (both public keys, distinct
``kid``s), new tokens are signed with B. A token signed with a key the server does not
know is refused, and once A is dropped altogether its tokens are refused too. The same
holds for HMAC secrets; half-given secondary flags stop the server at start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from bastion.cli import parse_args
from bastion.core.settings import ConfigError
from tests.dbfixtures import fresh_sqlite_url
from tests.keys import rsa_pem_pair
from tests.server.harness import CLIENT_ID, CLIENT_SECRET, base_flags, running
from tests.server.test_auth_flows import client_for, new_user, validate

ISSUER = "https://auth.example.test"


def flags(database: str, *key_flags: str) -> list[str]:
    common = [f for f in base_flags("sqlite", database) if not f.startswith("--jwt-")]
    # one issuer across restarts (by default it names the server's port, new each start)
    return [*common, "--app-cookie-secure=false", f"--url={ISSUER}", *key_flags]


def rsa_primary(pair: tuple[str, str]) -> list[str]:
    return ["--jwt-type=RS256", f"--jwt-private-key={pair[0]}", f"--jwt-public-key={pair[1]}"]


def introspect(url: str, token: str) -> dict[str, Any]:
    body = {"token": token, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}
    answer: dict[str, Any] = httpx.post(f"{url}/oauth/introspect", data=body).json()
    return answer


def served_claims(url: str, token: str) -> dict[str, Any]:
    keys = KeySet.import_key_set(httpx.get(f"{url}/.well-known/jwks.json").json())
    return dict(jwt.decode(token, keys, algorithms=["RS256"]).claims)


def test_rsa_rotation_keeps_old_tokens_valid_and_refuses_unknown_keys(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path)
    old, new = rsa_pem_pair(), rsa_pem_pair()
    old_kid = RSAKey.import_key(old[1]).thumbprint()
    new_kid = RSAKey.import_key(new[1]).thumbprint()
    with (
        running(flags(database, *rsa_primary(old)), tmp_path, name="a") as srv,
        client_for(srv) as client,
    ):
        _, tokens = new_user(client)
    access, id_token = tokens["access_token"], tokens["id_token"]

    rotated = [
        *rsa_primary(new),
        "--jwt-secondary-type=RS256",
        f"--jwt-secondary-public-key={old[1]}",
    ]
    with running(flags(database, *rotated), tmp_path, name="b") as srv, client_for(srv) as client:
        kids = [k["kid"] for k in httpx.get(f"{srv.url}/.well-known/jwks.json").json()["keys"]]
        assert kids == [new_kid, old_kid]
        assert validate(client, access).status_code == 200
        assert introspect(srv.url, access)["active"] is True
        claims = served_claims(srv.url, id_token)  # picked by kid from the served JWKS
        assert claims["aud"] == CLIENT_ID
        _, fresh = new_user(client)
        assert jwt.decode(fresh["access_token"], RSAKey.import_key(new[1])).header["kid"] == new_kid
        assert validate(client, fresh["access_token"]).status_code == 200
        # the old token's claims signed again by a key nobody configured
        stranger = RSAKey.generate_key(2048)
        for kid in (old_kid, stranger.thumbprint()):
            forged = jwt.encode(
                {"alg": "RS256", "kid": kid},
                jwt.decode(access, RSAKey.import_key(old[1])).claims,
                stranger,
                algorithms=["RS256"],
            )
            assert validate(client, forged).status_code == 401
            assert introspect(srv.url, forged) == {"active": False}

    with (
        running(flags(database, *rsa_primary(new)), tmp_path, name="c") as srv,
        client_for(srv) as client,
    ):
        assert validate(client, access).status_code == 401
        assert introspect(srv.url, access) == {"active": False}


def test_hmac_rotation(tmp_path: Path) -> None:
    database = fresh_sqlite_url(tmp_path)
    first = ["--jwt-type=HS256", "--jwt-secret=the-first-secret-of-enough-length"]
    with running(flags(database, *first), tmp_path, name="a") as srv, client_for(srv) as client:
        _, tokens = new_user(client)
    rotated = [
        "--jwt-type=HS512",
        "--jwt-secret=the-second-secret-of-enough-length",
        "--jwt-secondary-type=HS256",
        "--jwt-secondary-secret=the-first-secret-of-enough-length",
    ]
    with running(flags(database, *rotated), tmp_path, name="b") as srv, client_for(srv) as client:
        assert validate(client, tokens["access_token"]).status_code == 200
        assert httpx.get(f"{srv.url}/.well-known/jwks.json").json() == {"keys": []}
        doc = httpx.get(f"{srv.url}/.well-known/openid-configuration").json()
        assert doc["id_token_signing_alg_values_supported"] == ["HS512", "HS256"]


HALF_GIVEN = [
    ("--jwt-secondary-secret=x", "--jwt-secondary-* key material needs --jwt-secondary-type"),
    ("--jwt-secondary-type=HS256", "--jwt-secondary-type HS256 needs --jwt-secondary-secret only"),
    (
        "--jwt-secondary-type=RS256",
        "--jwt-secondary-type RS256 needs --jwt-secondary-public-key "
        "(or --jwt-secondary-private-key), PEM",
    ),
]


@pytest.mark.parametrize(("extra", "message"), HALF_GIVEN)
def test_half_given_secondary_key_stops_the_server(extra: str, message: str) -> None:
    args = flags("./unused.db", "--jwt-type=HS256", "--jwt-secret=s", extra)
    with pytest.raises(ConfigError) as refused:
        parse_args(args)
    assert refused.value.message == message
