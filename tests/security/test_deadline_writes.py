"""A 503 at the request deadline means nothing was written (issue 36, item 10), replayed
as the issue found it: signups wait on ``service_users`` locked by another connection,
and the lock is released at moments spread around the deadline (``--request-timeout``),
some before it, some just after it (when a cancel used to race the commit), some long
after. Whatever each answer, the database agrees with it: a 503 saved no account, a 200
saved it. The same over gRPC, which the deadline bounds too: UNAVAILABLE saved nothing,
OK saved it. And a tuple write whose announcement in Redis stalls after its commit answers
the commit's success. PostgreSQL + Redis, the deployment the issue measured."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import grpc
import httpx
import psycopg
import pytest
from redis import Redis

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ADMIN_SECRET, ServerProcess, running
from tests.server.locks import postgres_dsn, postgres_users_locked

T = TypeVar("T")

TIMEOUT = 1.0
#: when the lock is released, from the moment the signup is sent, past the deadline
RELEASES = (-0.4, -0.1, -0.02, -0.01, 0.0, 0.005, 0.01, 0.02, 0.03, 0.06, 0.1, 0.2, 0.6, 1.5)


@dataclass
class Deployment:
    server: ServerProcess
    database_url: str
    redis_url: str


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp: Path = tmp_path_factory.mktemp("deadline-writes")
    flags = flags_for("postgres-redis", tmp, f"--request-timeout={TIMEOUT:g}")

    def flag(name: str) -> str:
        return next(f.split("=", 1)[1] for f in flags if f.startswith(f"--{name}="))

    with running(flags, tmp) as server:
        yield Deployment(server, flag("database-url"), flag("memory-store-url"))


def saved(url: str, email: str) -> bool:
    with psycopg.connect(postgres_dsn(url)) as conn:
        row = conn.execute("select count(*) from service_users where email = %s", (email,))
        return bool(row.fetchone()[0])  # type: ignore[index]


def released_around_the_deadline(url: str, release: float, send: Callable[[], T]) -> T:
    """``send()``'s answer, sent while ``service_users`` is locked; the lock is released
    ``release`` seconds past the deadline, counted from the sending."""
    with ThreadPoolExecutor(1) as pool:
        with postgres_users_locked(url):
            sent = time.monotonic()
            answer = pool.submit(send)
            time.sleep(max(0.0, TIMEOUT + release - (time.monotonic() - sent)))
        return answer.result()


@pytest.mark.parametrize("release", RELEASES)
def test_a_signup_answered_503_saved_nothing(deployment: Deployment, release: float) -> None:
    server, url = deployment.server, deployment.database_url
    email = f"deadline-{uuid.uuid4().hex[:10]}@example.com"
    body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
    with httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http:
        answer = released_around_the_deadline(
            url, release, partial(http.post, "/v1/signup", json=body)
        )
    status = answer.status_code
    assert status in (200, 503), answer.text
    assert saved(url, email) is (status == 200), (release, status)


@pytest.mark.parametrize("release", RELEASES[2:11])
def test_a_grpc_signup_answered_unavailable_saved_nothing(
    deployment: Deployment, release: float
) -> None:
    """No grpc-timeout: the server's deadline is the call's only one."""
    server, url = deployment.server, deployment.database_url
    email = f"deadline-{uuid.uuid4().hex[:10]}@example.com"
    request = authorizer_pb2.SignupRequest(
        email=email, password=PASSWORD, confirm_password=PASSWORD
    )

    def signup() -> grpc.StatusCode:
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            try:
                authorizer_pb2_grpc.AuthorizerServiceStub(channel).Signup(request)
            except grpc.RpcError as error:
                # The deadline's own answer, or the database's lock wait that inherits it.
                return error.code()  # type: ignore[no-any-return]
        return grpc.StatusCode.OK

    status = released_around_the_deadline(url, release, signup)
    assert status in (grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE)
    assert saved(url, email) is (status == grpc.StatusCode.OK), (release, status)


MODEL = "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n"
ADMIN = {"x-service-admin-secret": ADMIN_SECRET}


def test_a_tuple_write_committed_before_a_redis_stall_answers_success(
    deployment: Deployment,
) -> None:
    """The write's announcement in Redis stalls after its commit (storage.fga_generation:
    the lease covers it): the answer is the commit's, 200, never a 503."""
    server, url = deployment.server, deployment.database_url
    doc = f"doc:{uuid.uuid4().hex[:10]}"
    tuples = {"tuples": [{"user": "user:ann", "relation": "viewer", "object": doc}]}
    with (
        httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=30) as http,
        ThreadPoolExecutor(1) as pool,
    ):
        assert http.post("/v1/admin/fga/model", json={"dsl": MODEL}, headers=ADMIN).is_success
        redis = Redis.from_url(deployment.redis_url)
        with psycopg.connect(postgres_dsn(url)) as locker:
            locker.execute("lock table service_fga_tuples in access exclusive mode")
            written = pool.submit(http.post, "/v1/admin/fga/tuples", json=tuples, headers=ADMIN)
            time.sleep(TIMEOUT / 5)  # the write announced itself and waits on the lock
            # Redis stalls from now on, longer than the request may last, and the write
            # goes through: its commit comes before the deadline, its "end" after it.
            redis.execute_command("CLIENT", "PAUSE", int(TIMEOUT * 2500), "ALL")
            locker.rollback()
        answer = written.result()
        time.sleep(TIMEOUT * 2.5)  # the pause ends
        check = {"user": "user:ann", "checks": [{"relation": "viewer", "object": doc}]}
        checked = http.post("/v1/check_permissions", json=check, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    assert [r["allowed"] for r in checked.json()["results"]] == [True]
