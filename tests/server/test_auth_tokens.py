"""Hostile tokens, replayed refresh tokens, concurrency, several processes, SMTP outages.

Every check goes through a real server process: forged JWTs (``alg: none``, tampered
payload, unknown ``kid``, expired, foreign issuer, HS/RS confusion against an RS256
server), a rotated refresh token replayed after the grace window (family revoked), 20
concurrent signups of one email on every database, a session started on one process and
refreshed, validated and ended on another, and a mail queued while SMTP is down.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from bastion.core.auth.user import identity_lock_key
from bastion.storage.sql.locks import pg_lock_id
from tests.dbfixtures import (
    fresh_database_url,
    fresh_postgres_url,
    fresh_redis_url,
    fresh_sqlite_url,
)
from tests.keys import rsa_pem_pair
from tests.mailsink import SpooledMailSink
from tests.server.harness import CLIENT_ID, base_flags, free_port, running
from tests.server.test_auth_flows import (
    PASSWORD,
    bearer,
    client_for,
    login,
    mail_flags,
    mails_to,
    new_user,
    refresh,
    session_cookie,
    signup,
    token_in,
    unique_email,
    validate,
    with_cookie,
)

JWT_SECRET = "test-jwt-secret-of-sufficient-length"


def _b64(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


def _resign(claims: dict[str, Any], *, kid: str = CLIENT_ID, alg: str = "HS256") -> str:
    header = {"alg": alg, "typ": "JWT", "kid": kid}
    return jwt.encode(header, claims, OctKey.import_key(JWT_SECRET.encode()), algorithms=[alg])


@pytest.fixture(scope="module")
def hs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    tmp = tmp_path_factory.mktemp("auth-tokens")
    with running(
        [*base_flags("sqlite", fresh_sqlite_url(tmp)), "--app-cookie-secure=false"], tmp
    ) as srv:
        yield srv


@pytest.fixture
def hs(hs_server: Any) -> Iterator[httpx.Client]:
    with client_for(hs_server) as client:
        yield client


def test_forged_and_stale_access_tokens_are_refused(hs: httpx.Client) -> None:
    _, tokens = new_user(hs)
    good = tokens["access_token"]
    claims = _claims(good)
    header, payload, signature = good.split(".")
    forged: dict[str, str] = {
        "alg none": f"{_b64({'alg': 'none', 'typ': 'JWT', 'kid': CLIENT_ID})}.{payload}.",
        "tampered": f"{header}.{_b64({**claims, 'roles': ['admin']})}.{signature}",
        "unknown kid": _resign(claims, kid="another-key"),
        "expired": _resign({**claims, "iat": claims["iat"] - 7200, "exp": claims["iat"] - 3600}),
        "foreign issuer": _resign({**claims, "iss": "https://evil.example"}),
        "HS512": _resign(claims, alg="HS512"),
        "garbage": "not.a.jwt",
    }
    for name, token in forged.items():
        response = validate(hs, token)
        assert response.status_code == 401, name
        assert hs.get("/v1/profile", headers=bearer(token)).status_code == 401, name
    # re-signed with the right key and unchanged claims, it is the same token again
    assert validate(hs, _resign(claims)).status_code == 200


def test_forged_url_headers_change_no_issuer_and_no_link(hs_server: Any, hs: httpx.Client) -> None:
    spoof = {"x-authorizer-url": "https://evil.example", "x-forwarded-host": "evil.example"}
    email = unique_email()
    response = hs.post(
        "/v1/signup",
        json={"email": email, "password": PASSWORD, "confirm_password": PASSWORD},
        headers=spoof,
    )
    assert _claims(response.json()["access_token"])["iss"] == hs_server.url
    body = {"token_type": "access_token", "token": response.json()["access_token"]}
    assert hs.post("/v1/validate_jwt_token", json=body, headers=spoof).status_code == 200


def test_rs256_server_refuses_hs_confusion(tmp_path: Path) -> None:
    private, public = rsa_pem_pair()
    flags = [
        *[
            f
            for f in base_flags("sqlite", fresh_sqlite_url(tmp_path))
            if not f.startswith("--jwt-")
        ],
        "--jwt-type=RS256",
        f"--jwt-private-key={private}",
        f"--jwt-public-key={public}",
    ]
    with running(flags, tmp_path) as srv, client_for(srv) as client:
        _, tokens = new_user(client)
        claims = _claims(tokens["access_token"])
        assert validate(client, tokens["access_token"]).status_code == 200
        jwks = client.get("/.well-known/jwks.json").json()["keys"]
        # an RSA key's kid is its RFC 7638 thumbprint (rotation keeps old kids resolvable)
        thumbprint = RSAKey.import_key(public).thumbprint()
        assert [(k["kid"], k["alg"], k["kty"]) for k in jwks] == [(thumbprint, "RS256", "RSA")]
        # the public key used as an HMAC secret: the classic algorithm confusion
        signing_input = f"{_b64({'alg': 'HS256', 'typ': 'JWT', 'kid': CLIENT_ID})}.{_b64(claims)}"
        mac = hmac.new(public.encode(), signing_input.encode(), hashlib.sha256).digest()
        confused = f"{signing_input}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"
        assert validate(client, confused).status_code == 401
        other_key = RSAKey.generate_key(2048)
        foreign = jwt.encode(
            {"alg": "RS256", "kid": CLIENT_ID}, claims, other_key, algorithms=["RS256"]
        )
        assert validate(client, foreign).status_code == 401


# -- refresh replay after the grace window (PostgreSQL + Redis) --------------------------------


@pytest.fixture(scope="module")
def shared_pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, str]]:
    """Two server processes on one PostgreSQL database and one Redis db."""
    tmp = tmp_path_factory.mktemp("auth-shared")
    redis_url = fresh_redis_url()
    flags = [
        *base_flags("postgres", fresh_postgres_url("authshared")),
        f"--memory-store-url={redis_url}",
        "--app-cookie-secure=false",
        # one public URL for both, as behind a load balancer: one issuer
        "--url=http://bastion.test",
    ]
    with running(flags, tmp, name="one") as one, running(flags, tmp, name="two") as two:
        yield one, two, redis_url


def test_refresh_replay_after_the_grace_window_ends_the_family(
    shared_pg: tuple[Any, Any, str],
) -> None:
    one, _, redis_url = shared_pg
    with client_for(one) as client:
        _, tokens = new_user(client, scope=["openid", "offline_access"])
        first = tokens["refresh_token"]
        rotated = refresh(client, first).json()
        claims = _claims(first)
        # Age the record of the replaced token past the grace window (as time would).
        store = redis.Redis.from_url(redis_url)
        try:
            key = f"auth:{claims['sub']}:{claims['sid']}:{claims['nonce']}:replaced"
            record = json.loads(store.get(key) or b"{}")
            assert record["token"] == first
            record["at"] -= 60
            store.set(key, json.dumps(record), keepttl=True)
        finally:
            store.close()
        replay = refresh(client, first)
        assert replay.status_code == 400
        assert replay.json()["error"] == "invalid_grant"
        # the thief's replay ended the family: the legitimate current tokens die too
        assert refresh(client, rotated["refresh_token"]).status_code == 400
        assert validate(client, rotated["access_token"]).status_code == 401


def test_a_session_moves_between_processes(shared_pg: tuple[Any, Any, str]) -> None:
    one, two, _ = shared_pg
    with client_for(one) as first, client_for(two) as second:
        # Behind one public name a browser sends that name as its Origin.
        first.headers["origin"] = second.headers["origin"] = "http://bastion.test"
        email = unique_email()
        cookie = session_cookie(signup(first, email))
        tokens = login(first, email, scope=["openid", "offline_access"]).json()
        assert second.get("/v1/profile", headers=with_cookie(cookie)).json()["email"] == email
        assert validate(second, tokens["access_token"]).status_code == 200
        renewed = refresh(second, tokens["refresh_token"])
        assert renewed.status_code == 200
        assert validate(first, renewed.json()["access_token"]).status_code == 200
        rotated = second.post("/v1/session", json={}, headers=with_cookie(cookie))
        assert rotated.status_code == 200
        assert first.post("/v1/session", json={}, headers=with_cookie(cookie)).status_code == 401
        access = renewed.json()["access_token"]
        assert first.post("/v1/logout", json={}, headers=bearer(access)).status_code == 200
        assert validate(second, access).status_code == 401


# -- uniqueness under concurrency ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "mariadb"])
def test_twenty_concurrent_signups_make_one_user(kind: str, tmp_path: Path) -> None:
    database_type = {"sqlite": "sqlite", "postgres": "postgres", "mariadb": "mariadb"}[kind]
    url = fresh_database_url(kind, tmp_path, "authrace")
    with running(base_flags(database_type, url), tmp_path) as srv:
        email = unique_email("race")
        barrier = threading.Barrier(20)
        statuses: list[tuple[int, str]] = []

        def attempt() -> None:
            with client_for(srv) as client:
                barrier.wait()
                response = signup(client, email)
                statuses.append((response.status_code, response.json().get("message", "")))

        threads = [threading.Thread(target=attempt) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(statuses)[-1:] == [(400, "user with given email already exists")]
        assert [s for s in statuses if s[0] == 200] == [(200, "Signed up successfully.")]
        assert statuses.count((400, "user with given email already exists")) == 19


def test_a_signup_holds_the_lock_of_its_phone_number_too(tmp_path: Path) -> None:
    """Email and phone number are each unique on their own, so a signup giving both holds
    both identity locks: while another holder keeps the number's lock, the signup waits
    on PostgreSQL (seen in pg_locks), and it completes once the lock is let go."""
    url = fresh_postgres_url("phonelock")
    phone = f"+1555{uuid.uuid4().int % 10**7:07d}"
    lock_id = pg_lock_id(identity_lock_key(phone_number=phone))
    with (
        running(base_flags("postgres", url), tmp_path) as srv,
        psycopg.connect(url, autocommit=True) as holder,
    ):
        holder.execute("SELECT pg_advisory_lock(%s)", (lock_id,))
        answers: list[httpx.Response] = []

        def attempt() -> None:
            with client_for(srv) as client:
                answers.append(signup(client, unique_email("phonelock"), phone_number=phone))

        thread = threading.Thread(target=attempt)
        thread.start()
        assert _eventually_waiting_on(holder, lock_id), "the signup never asked for the lock"
        assert answers == []
        holder.execute("SELECT pg_advisory_unlock(%s)", (lock_id,))
        thread.join(timeout=30)
        assert [a.status_code for a in answers] == [200]


def _eventually_waiting_on(conn: psycopg.Connection[Any], lock_id: int) -> bool:
    """Some session waits for advisory lock ``lock_id`` (pg_locks splits the bigint)."""
    high, low = (lock_id >> 32) & 0xFFFFFFFF, lock_id & 0xFFFFFFFF
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND classid::bigint = %s AND objid::bigint = %s",
            (high, low),
        ).fetchone()
        if row is not None and row[0] > 0:
            return True
        time.sleep(0.05)
    return False


# -- the outbox carries mail across an SMTP outage ----------------------------------------------


def test_mail_queued_while_smtp_is_down_is_delivered_later(tmp_path: Path) -> None:
    sink = SpooledMailSink(free_port(), tmp_path / "mail")
    database = fresh_sqlite_url(tmp_path)
    flags = [*base_flags("sqlite", database), *mail_flags(sink)]
    with running(flags, tmp_path) as srv, client_for(srv) as client:
        email, _ = new_user(client)
        answer = client.post("/v1/forgot_password", json={"email": email})
        assert answer.status_code == 200
        _wait_for_failed_attempt(database)
        with sink:
            (mail,) = mails_to(sink, email, timeout=60)
        assert mail["Subject"] == "Reset Password"


def _wait_for_failed_attempt(database: str, timeout: float = 30) -> None:
    """Until the outbox has tried the mail once and failed (the relay is down)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with sqlite3.connect(database) as db:
            row = db.execute(
                "SELECT attempts, last_error FROM service_outbox WHERE kind = 'mail'"
            ).fetchone()
        if row is not None and row[0] >= 1 and row[1]:
            return
        time.sleep(0.1)
    raise AssertionError("the outbox never tried the mail")


# -- expired emailed links ------------------------------------------------------------------------


def _expire_link(database: str, token: str) -> str:
    """The same link, signed with our key but already expired, stored in its place."""
    claims = _claims(token)
    expired = _resign({**claims, "iat": claims["iat"] - 7200, "exp": claims["iat"] - 3600})
    with sqlite3.connect(database) as db:
        changed = db.execute(
            "UPDATE service_verification_requests SET token = ? WHERE token = ?", (expired, token)
        ).rowcount
    assert changed == 1
    return expired


def test_expired_verification_reset_and_magic_links_are_refused(tmp_path: Path) -> None:
    sink = SpooledMailSink(free_port(), tmp_path / "mail")
    database = fresh_sqlite_url(tmp_path)
    flags = [
        *base_flags("sqlite", database),
        *mail_flags(sink),
        "--enable-email-verification",
        "--enable-magic-link-login",
    ]
    with sink, running(flags, tmp_path) as srv, client_for(srv) as client:
        email = unique_email("expiry")
        assert signup(client, email).status_code == 200
        signup_token = _expire_link(database, token_in(mails_to(sink, email)[0]))
        refused = client.post("/v1/verify_email", json={"token": signup_token})
        assert refused.status_code == 400
        assert refused.json()["message"] == "invalid verification token"
        landing = client.get(f"/verify_email?token={signup_token}", follow_redirects=False)
        assert landing.status_code == 307
        assert "error=invalid+verification+token" in landing.headers["location"]

        magic = unique_email("expiry-magic")
        assert client.post("/v1/magic_link_login", json={"email": magic}).status_code == 200
        magic_token = _expire_link(database, token_in(mails_to(sink, magic)[0]))
        assert client.post("/v1/verify_email", json={"token": magic_token}).status_code == 400

        assert client.post("/v1/forgot_password", json={"email": email}).status_code == 200
        reset_token = _expire_link(database, token_in(mails_to(sink, email, 2)[1]))
        reset = client.post(
            "/v1/reset_password",
            json={"token": reset_token, "password": PASSWORD, "confirm_password": PASSWORD},
        )
        assert reset.status_code == 400
        assert reset.json()["message"] == "invalid token"
