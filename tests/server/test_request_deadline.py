"""--request-timeout (issue 27): with ``service_users`` locked by another connection for
longer than the deadline, logins answer 503 ``unavailable`` with Retry-After instead of
waiting for the lock; their connections return to the pool, and a login after it succeeds.
More logins than the pool has connections wait on the lock at once, and an FGA check
(which never reads ``service_users``) is answered while they wait: the engine's reads use
connections the stalled requests cannot take. On PostgreSQL + Redis and on MariaDB."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.dbfixtures import fresh_mariadb_url, fresh_postgres_url, fresh_redis_url
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.locks import mariadb_users_locked, postgres_users_locked

PASSWORD = "Deadline!pass1"
ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
MODEL = "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n"
#: More logins at once than the server's database pool holds connections (10).
BLOCKED_LOGINS = 12


@pytest.fixture(scope="module", params=["postgres-redis", "mariadb"])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, contextlib.AbstractContextManager[None]]]:
    tmp: Path = tmp_path_factory.mktemp(f"deadline-{request.param}")
    if request.param == "mariadb":
        url = fresh_mariadb_url("deadline")
        flags = base_flags("mariadb", url)
        locked = mariadb_users_locked(url)
    else:
        url = fresh_postgres_url("deadline")
        flags = [*base_flags("postgres", url), f"--memory-store-url={fresh_redis_url()}"]
        locked = postgres_users_locked(url)
    # No rate limit: on the SQL memory store its lease, once a second old, is renewed by a
    # write that waits for a connection like any other, and the logins hold them all (on
    # a slow machine the check then waited for the logins' deadline). Not this test's
    # subject; the reserved connections serve authorization reads only.
    flags = [*(f for f in flags if not f.startswith("--rate-limit")), "--rate-limit-rps=0"]
    with running([*flags, "--request-timeout=2"], tmp) as srv:
        yield srv, locked


def test_a_login_waiting_on_a_locked_table_answers_503_and_frees_its_connection(
    deployment: tuple[ServerProcess, contextlib.AbstractContextManager[None]],
) -> None:
    server, users_locked = deployment
    email = f"deadline-{uuid.uuid4().hex[:10]}@example.com"
    credentials = {"email": email, "password": PASSWORD}
    check = {"user": "user:ann", "checks": [{"relation": "viewer", "object": "doc:1"}]}
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=60) as http:
        signup = {**credentials, "confirm_password": PASSWORD}
        assert http.post("/v1/signup", json=signup).status_code == 200
        assert http.post("/v1/admin/fga/model", json={"dsl": MODEL}, headers=ADMIN).is_success
        tuples = {"tuples": [{"user": "user:ann", "relation": "viewer", "object": "doc:1"}]}
        assert http.post("/v1/admin/fga/tuples", json=tuples, headers=ADMIN).is_success

        def login(n: int) -> httpx.Response:
            # Addresses of their own: one account's concurrent logins are throttled.
            return http.post("/v1/login", json={**credentials, "email": f"{n}-{email}"})

        with users_locked, ThreadPoolExecutor(BLOCKED_LOGINS) as pool:
            logins = [pool.submit(login, n) for n in range(BLOCKED_LOGINS)]
            # Time for the logins to reach the locked table (not a limit: were the check
            # to come first anyway, it would only prove less).
            time.sleep(0.5)
            checked = http.post("/v1/check_permissions", json=check, headers=ADMIN)
            # Answered while the logins still wait on the lock: they hold every
            # connection they may, and the check's reads use the ones kept from them.
            waiting = sum(not future.done() for future in logins)
            answers = [future.result() for future in logins]
        after = http.post("/v1/login", json=credentials)

    assert waiting == BLOCKED_LOGINS
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.json()["code"] == "unavailable"
        assert answer.headers["retry-after"] == "1"
    assert checked.status_code == 200, checked.text
    assert [r["allowed"] for r in checked.json()["results"]] == [True]
    assert after.status_code == 200, after.text
