"""Refresh grace (issue 28): one refresh token yields at most one live successor, whether
duplicates arrive in parallel or one after another inside the grace window."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.dbfixtures import fresh_postgres_url, fresh_redis_url, fresh_sqlite_url
from tests.server.harness import ServerProcess, base_flags, running
from tests.server.test_auth_flows import client_for, new_user, refresh, validate

PARALLEL = 10


@pytest.fixture(scope="module", params=["sqlite", "postgres+redis"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("refresh-grace")
    if request.param == "sqlite":
        flags = base_flags("sqlite", fresh_sqlite_url(tmp))
    else:
        flags = [
            *base_flags("postgres", fresh_postgres_url("refreshgrace")),
            f"--memory-store-url={fresh_redis_url()}",
        ]
    with running([*flags, "--app-cookie-secure=false"], tmp) as srv:
        yield srv


def test_replays_inside_the_grace_window_mint_nothing(server: ServerProcess) -> None:
    with client_for(server) as client:
        _, tokens = new_user(client, scope=["openid", "offline_access"])
        first = tokens["refresh_token"]
        successor = refresh(client, first)
        assert successor.status_code == 200, successor.text
        for _ in range(4):
            replay = refresh(client, first)
            assert replay.status_code == 400
            assert replay.json()["error"] == "invalid_grant"
        # the family lives on: the one successor still works
        current = successor.json()
        assert validate(client, current["access_token"]).status_code == 200
        assert refresh(client, current["refresh_token"]).status_code == 200


def test_parallel_refreshes_of_one_token_have_one_winner(server: ServerProcess) -> None:
    with client_for(server) as client:
        _, tokens = new_user(client, scope=["openid", "offline_access"])
    first = tokens["refresh_token"]

    def attempt(_: int) -> tuple[int, str | None]:
        with client_for(server) as own:
            answer = refresh(own, first)
            body = answer.json()
            return answer.status_code, body.get("access_token")

    with ThreadPoolExecutor(PARALLEL) as pool:
        outcomes = list(pool.map(attempt, range(PARALLEL)))
    statuses = sorted(status for status, _ in outcomes)
    assert statuses == [200] + [400] * (PARALLEL - 1)
    with client_for(server) as client:
        live = [
            access
            for _, access in outcomes
            if access is not None and validate(client, access).status_code == 200
        ]
    assert len(live) == 1
