"""The second battery: a user asserting its own relations, guessing second-factor codes
across challenges, racing the login throttle, locking the owner out, guessing the admin
secret through the header, and replaying a refresh token inside the grace window. Each
case fails if the attack works; each runs on SQLite and on PostgreSQL + Redis."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pyotp
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from bastion.conformance.operations import OPERATIONS
from bastion.conformance.outcome import Credentials
from bastion.conformance.surfaces import GraphQLSurface, GrpcSurface, RestSurface
from bastion.conformance.surfaces.base import Surface
from bastion.core.auth.user import identifier_digest
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ADMIN_SECRET, CLIENT_ID, CLIENT_SECRET, ServerProcess, running
from tests.webhook_receiver import Receiver

TOTP_STEP = 30


@dataclass
class Throttled:
    server: ServerProcess

    def http(self, source: str | None = None) -> httpx.Client:
        """A client; ``source`` is the address the (trusted) proxy says it forwards for."""
        headers = {"origin": self.server.url}
        if source:
            headers["x-forwarded-for"] = source
        return httpx.Client(base_url=self.server.url, headers=headers, timeout=60)


@pytest.fixture(scope="module", params=["sqlite", "postgres-redis"])
def throttled(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Throttled]:
    tmp: Path = tmp_path_factory.mktemp(f"throttle-{request.param}")
    flags = flags_for(
        request.param,
        tmp,
        "--trusted-proxies=127.0.0.1",
        "--enable-mfa",
        "--enable-totp-login",
        "--enforce-mfa=false",
        "--webhook-allow-private-targets",
    )
    with running(flags, tmp) as server:
        yield Throttled(server)


def signup(http: httpx.Client, **extra: object) -> tuple[str, dict[str, object]]:
    email = f"thr-{uuid.uuid4().hex[:10]}@example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD, **extra}
    answer = http.post("/v1/signup", json=body)
    assert answer.status_code == 200, answer.text
    return email, answer.json()


_SOURCES = itertools.count(1)


def source() -> str:
    """A client address no other test in this process has used: budgets are per address,
    so a reused one would start half spent."""
    n = next(_SOURCES)
    return f"2001:db8:{n:x}::1"


# -- 1. a user grants itself a relation --------------------------------------------------------


def surfaces(server: ServerProcess) -> dict[str, Surface]:
    return {
        "rest": RestSurface([server.url]),
        "graphql": GraphQLSurface([server.url]),
        "grpc": GrpcSurface([f"127.0.0.1:{server.grpc_port}"]),
    }


def test_a_user_cannot_grant_itself_a_relation_on_any_surface(throttled: Throttled) -> None:
    model = (
        "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n"
        "    define owner: [user]\n    define viewer: [user] or owner\n"
    )
    admin = Credentials(admin_secret=ADMIN_SECRET)
    with throttled.http(source()) as http:
        _, body = signup(http)
        assert http.post(
            "/v1/admin/fga/model",
            json={"dsl": model},
            headers={"x-service-admin-secret": ADMIN_SECRET},
        ).is_success
    sub = str(body["user"]["id"])  # type: ignore[index]
    secret = f"doc:secret-{uuid.uuid4().hex[:6]}"
    check = {
        "checks": [
            {
                "relation": "viewer",
                "object": secret,
                "contextual_tuples": [
                    {"user": f"user:{sub}", "relation": "owner", "object": secret}
                ],
            }
        ]
    }
    user = Credentials(bearer=str(body["access_token"]))
    for name, surface in surfaces(throttled.server).items():
        try:
            refused = surface.call(OPERATIONS["check_permissions"], check, user)
            assert not refused.ok, (name, refused.body)
            assert refused.code == "permission_denied", (name, refused.describe())
            assert "super-admin" in refused.message, (name, refused.message)
            # A super-admin may assert facts, about anyone.
            allowed = surface.call(
                OPERATIONS["check_permissions"], {**check, "user": f"user:{sub}"}, admin
            )
            assert allowed.ok, (name, allowed.describe())
            assert allowed.body["results"][0]["allowed"] is True
        finally:
            surface.close()


# -- 2. second-factor codes guessed across challenges -------------------------------------------


def test_codes_are_checked_at_most_ten_times_across_challenges(throttled: Throttled) -> None:
    with throttled.http(source()) as http:
        email, _ = signup(http, is_multi_factor_auth_enabled=True)
        outcomes: Counter[int] = Counter()
        secret = ""
        for _ in range(10):
            login = http.post("/v1/login", json={"email": email, "password": PASSWORD})
            assert login.status_code == 200, login.text
            secret = secret or str(login.json().get("authenticator_secret") or "")
            mfa = login.cookies.get("mfa") or ""
            for _ in range(5):
                wrong = http.post(
                    "/v1/verify_otp",
                    json={"email": email, "otp": "000000", "is_totp": True},
                    headers={"cookie": f"mfa={mfa}"},
                )
                outcomes[wrong.status_code] += 1
        # A challenge dies after 5 wrong codes (401 after that); codes actually compared
        # answer 400 "invalid otp": at most 10 of them in all.
        assert outcomes[400] <= 10, outcomes
        assert outcomes[429] > 0, outcomes
        login = http.post("/v1/login", json={"email": email, "password": PASSWORD})
        mfa = login.cookies.get("mfa") or ""
        right = pyotp.TOTP(secret).now()
        late = http.post(
            "/v1/verify_otp",
            json={"email": email, "otp": right, "is_totp": True},
            headers={"cookie": f"mfa={mfa}"},
        )
    assert late.status_code == 429, late.text
    assert int(late.headers["retry-after"]) > 0


def test_a_spent_guess_budget_is_announced_once(throttled: Throttled) -> None:
    """``user.mfa_guesses_exhausted`` goes out when the budget runs out, not for every code refused
    after it (an audit row records each)."""
    admin = {"x-service-admin-secret": ADMIN_SECRET}
    hooks = Receiver()
    with hooks.running(), throttled.http(source()) as http:
        for event in ("user.mfa_guesses_exhausted", "user.login"):
            body = {"event_name": event, "endpoint": hooks.url, "enabled": True}
            added = http.post("/v1/admin/add_webhook", json=body, headers=admin)
            assert added.status_code == 200, added.text
        listed = http.post("/v1/admin/webhooks", json={}, headers=admin).json()["webhooks"]
        ids = [w["id"] for w in listed if w["endpoint"] == hooks.url]
        try:
            email, _ = signup(http, is_multi_factor_auth_enabled=True)
            refused = Counter[int]()
            for _ in range(4):
                login = http.post("/v1/login", json={"email": email, "password": PASSWORD})
                mfa = login.cookies.get("mfa") or ""
                for _ in range(5):
                    wrong = http.post(
                        "/v1/verify_otp",
                        json={"email": email, "otp": "000000", "is_totp": True},
                        headers={"cookie": f"mfa={mfa}"},
                    )
                    refused[wrong.status_code] += 1
            assert refused[429] >= 5, refused
            # A later event: once it arrived, everything queued before it had its turn.
            sentinel, _ = signup(http)
            assert http.post("/v1/login", json={"email": sentinel, "password": PASSWORD}).is_success
            seen: list[dict[str, object]] = []
            while not any(e["event_name"] == "user.login" for e in seen):
                seen = [r.json for r in hooks.wait_for(len(seen) + 1)]
        finally:
            for webhook_id in ids:
                http.post("/v1/admin/delete_webhook", json={"id": webhook_id}, headers=admin)
    locked = [e for e in seen if e["event_name"] == "user.mfa_guesses_exhausted"]
    assert len(locked) == 1, seen
    assert locked[0]["user"]["email"] == email  # type: ignore[index]
    assert locked[0]["auth_recipe"] == "totp"


# -- 3. the login throttle under parallel guesses ----------------------------------------------


def test_parallel_wrong_logins_reach_the_password_check_at_most_five_times(
    throttled: Throttled,
) -> None:
    with throttled.http(source()) as http:
        email, _ = signup(http)
    attacker = source()
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(20)

    def guess() -> None:
        with throttled.http(attacker) as client:
            barrier.wait()
            for _ in range(5):
                answer = client.post("/v1/login", json={"email": email, "password": "Wrong!pass1"})
                with lock:
                    statuses.append(answer.status_code)

    threads = [threading.Thread(target=guess) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    counted = Counter(statuses)
    assert len(statuses) == 100
    # 401: the password was checked; 429: refused before the hash. 5 per source+account.
    assert counted[401] <= 5, counted
    assert counted[401] + counted[429] == 100, counted


# -- 4. the lock-out cannot be turned against the owner ----------------------------------------


def test_a_stranger_spending_the_accounts_budget_does_not_lock_out_a_known_device(
    throttled: Throttled,
) -> None:
    with throttled.http(source()) as owner:
        email, _ = signup(owner)
        first = owner.post("/v1/login", json={"email": email, "password": PASSWORD})
        assert first.status_code == 200
        device = first.cookies.get("bastion_device")
        assert device
    # Strangers from many addresses spend the account's budget (20 per 15 minutes).
    for _ in range(6):
        with throttled.http(source()) as stranger:
            for _ in range(5):
                stranger.post("/v1/login", json={"email": email, "password": "Wrong!pass1"})
    with throttled.http(source()) as unknown_client:
        locked = unknown_client.post("/v1/login", json={"email": email, "password": PASSWORD})
    assert locked.status_code == 429
    with throttled.http(source()) as owner_device:
        again = owner_device.post(
            "/v1/login",
            json={"email": email, "password": PASSWORD},
            headers={"cookie": f"bastion_device={device}"},
        )
    assert again.status_code == 200, again.text
    assert again.json()["access_token"]


def _mac_cookie(key_secret: str, info: bytes, payload: str) -> str:
    """A cookie of the form ``<payload>.<mac>``, keyed as a forger with ``key_secret``
    would key it (HKDF-SHA256, then HMAC-SHA256 cut to 32 hex digits)."""
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        key_secret.encode()
    )
    return f"{payload}.{hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()[:32]}"


def test_device_cookies_forged_with_the_client_secret_or_dated_ahead_are_no_device(
    throttled: Throttled,
) -> None:
    """Issue 36 (13): relying parties hold ``--client-secret``; a device cookie keyed from
    it (in the old or the new shape), one dated ten years ahead, or a stranger's genuine
    cookie of its own account does not keep the owner's budget; the genuine one does."""
    with throttled.http(source()) as owner:
        email, answer = signup(owner)
        user_id = str(answer["user"]["id"])  # type: ignore[index]
        first = owner.post("/v1/login", json={"email": email, "password": PASSWORD})
        device = first.cookies.get("bastion_device")
        stranger_email, _ = signup(owner)
        theirs = owner.post("/v1/login", json={"email": stranger_email, "password": PASSWORD})
        stranger_device = theirs.cookies.get("bastion_device")
    for _ in range(6):
        with throttled.http(source()) as stranger:
            for _ in range(5):
                stranger.post("/v1/login", json={"email": email, "password": "Wrong!pass1"})
    now, ahead = int(time.time()), int(time.time()) + 10 * 365 * 24 * 3600
    digest = identifier_digest(email)
    v1, v2 = b"bastion device cookie v1", b"bastion device cookie v2"
    forged = {
        "client secret, old shape": _mac_cookie(CLIENT_SECRET, v1, f"{digest}.{now}"),
        "client secret, ten years ahead": _mac_cookie(CLIENT_SECRET, v1, f"{digest}.{ahead}"),
        "client secret, new shape": _mac_cookie(
            CLIENT_SECRET, v2, f"{user_id}.{now}.{digest}"
        ).replace(f".{digest}.", "."),
        "the server's key, ten years ahead": _mac_cookie(
            ADMIN_SECRET, v2, f"{user_id}.{ahead}.{digest}"
        ).replace(f".{digest}.", "."),
        "the stranger's own device cookie": str(stranger_device),
    }
    for what, cookie in forged.items():
        with throttled.http(source()) as forger:
            tried = forger.post(
                "/v1/login",
                json={"email": email, "password": PASSWORD},
                headers={"cookie": f"bastion_device={cookie}"},
            )
        assert tried.status_code == 429, (what, tried.status_code)
    with throttled.http(source()) as owner_device:
        genuine = owner_device.post(
            "/v1/login",
            json={"email": email, "password": PASSWORD},
            headers={"cookie": f"bastion_device={device}"},
        )
    assert genuine.status_code == 200, genuine.text
    assert device is not None
    assert device.split(".")[0] == user_id  # bound to the account, not to the address


# -- 5. guessing the admin secret through the header -------------------------------------------


@pytest.mark.parametrize("header", ["x-service-admin-secret", "x-authorizer-admin-secret"])
def test_wrong_admin_headers_spend_the_sources_budget_only(
    throttled: Throttled, header: str
) -> None:
    guesser = source()
    with throttled.http(guesser) as http:
        assert http.get("/v1/admin/meta", headers={header: ADMIN_SECRET}).status_code == 200
        answers = [
            http.get("/v1/admin/meta", headers={header: f"guess-{i}"}).status_code
            for i in range(12)
        ]
        assert answers[:10] == [401] * 10
        assert answers[10:] == [429, 429]
        # Spent: even the right secret is not checked from this address ...
        assert http.get("/v1/admin/meta", headers={header: ADMIN_SECRET}).status_code == 429
        login = http.post("/v1/admin/login", json={"admin_secret": ADMIN_SECRET})
        assert login.status_code == 429
    # ... while the operator elsewhere is not locked out.
    with throttled.http(source()) as operator:
        assert operator.get("/v1/admin/meta", headers={header: ADMIN_SECRET}).status_code == 200


def _in_parallel(throttled: Throttled, address: str, secrets: list[str]) -> list[int]:
    """Each secret sent on ``/v1/admin/meta`` at once from ``address``; the statuses."""
    statuses: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(secrets))

    def call(secret: str) -> None:
        with throttled.http(address) as client:
            barrier.wait()
            answer = client.get("/v1/admin/meta", headers={"x-service-admin-secret": secret})
            with lock:
                statuses.append(answer.status_code)

    threads = [threading.Thread(target=call, args=(s,)) for s in secrets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return statuses


def test_the_right_admin_secret_passes_however_many_calls_are_in_flight(
    throttled: Throttled,
) -> None:
    """An admin backend calling with its header from one address at high concurrency."""
    assert Counter(_in_parallel(throttled, source(), [ADMIN_SECRET] * 30)) == {200: 30}


def test_parallel_wrong_admin_secrets_get_at_most_ten_verdicts(throttled: Throttled) -> None:
    statuses = Counter(_in_parallel(throttled, source(), [f"guess-{i}" for i in range(30)]))
    assert statuses[401] <= 10, statuses
    assert statuses[401] + statuses[429] == 30, statuses


# -- 6. refresh replays inside the grace window ------------------------------------------------


def test_a_refresh_replayed_inside_the_grace_window_opens_no_session(
    throttled: Throttled,
) -> None:
    with throttled.http(source()) as http:
        email, _ = signup(http)
        login = http.post(
            "/v1/login", json={"email": email, "password": PASSWORD, "scope": ["offline_access"]}
        ).json()

        def refresh(token: str) -> httpx.Response:
            return http.post(
                "/oauth/token",
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": token,
                    "client_id": CLIENT_ID,
                },
            )

        first = refresh(login["refresh_token"])
        assert first.status_code == 200
        replays = [refresh(login["refresh_token"]) for _ in range(4)]
        assert [r.status_code for r in replays] == [400] * 4
        assert all("access_token" not in r.text for r in replays)
        assert refresh(first.json()["refresh_token"]).status_code == 200
