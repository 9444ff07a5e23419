"""Two bastion processes on one PostgreSQL and one Redis (the production setup): a tuple
written or deleted through one is used by the very next check on the other, which learns
of it from the store's generation in Redis (``storage.fga_generation``) and otherwise
skips its SQL revision read."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.dbfixtures import fresh_postgres_url, fresh_redis_url
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running
from tests.server.test_failover_redis import metric

API_KEY = "generation-test-key"
STORE = "00000000000000000000000000"
MODEL = """model
  schema 1.1

type user

type document
  relations
    define viewer: [user]
"""


def admin(server: ServerProcess, path: str, body: dict[str, object]) -> None:
    headers = {"origin": server.url, "x-service-admin-secret": ADMIN_SECRET}
    response = httpx.post(f"{server.url}{path}", json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text


def tuples(user: str) -> dict[str, object]:
    return {"tuples": [{"user": user, "relation": "viewer", "object": "document:1"}]}


def check(server: ServerProcess, user: str) -> bool:
    response = httpx.post(
        f"{server.url}/stores/{STORE}/check",
        json={"tuple_key": {"user": user, "relation": "viewer", "object": "document:1"}},
        headers={"authorization": f"Bearer {API_KEY}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return bool(response.json()["allowed"])


def generation_reads(server: ServerProcess, outcome: str) -> float:
    return metric(server, f'bastion_fga_generation_reads_total{{outcome="{outcome}"}}')


def test_a_write_through_one_process_is_used_by_the_next_check_on_the_other(
    tmp_path: Path,
) -> None:
    flags = [
        *base_flags("postgres", fresh_postgres_url("generation")),
        f"--memory-store-url={fresh_redis_url()}",
        f"--openfga-api-key={API_KEY}",
    ]
    with running(flags, tmp_path, name="a") as a, running(flags, tmp_path, name="b") as b:
        admin(a, "/v1/admin/fga/model", {"dsl": MODEL})
        for round_ in range(3):
            user = f"user:{round_}"
            assert not check(b, user)
            admin(a, "/v1/admin/fga/tuples", tuples(user))
            assert check(b, user)  # no waiting, no polling
            admin(a, "/v1/admin/fga/tuples/delete", tuples(user))
            assert not check(b, user)
        assert generation_reads(b, "current") > 0
        assert generation_reads(b, "unavailable") == 0
