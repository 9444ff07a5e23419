"""Two bastion processes whose memory store is a three-master Redis Cluster pass the
conformance suite (sessions, challenges, rate limits and counters spread over slots)."""

from __future__ import annotations

from pathlib import Path

from tests.conformance.test_cross_surface import (
    SUITE_FLAGS,
    default_flags,
    run_suite,
    suite_args,
    totals,
)
from tests.dbfixtures import fresh_postgres_url
from tests.redis_topologies import redis_cluster
from tests.server.harness import running, start_server


def test_two_processes_on_a_redis_cluster_pass_the_suite(tmp_path: Path) -> None:
    with redis_cluster(tmp_path / "cluster") as cluster:
        flags = [
            *default_flags("postgres", fresh_postgres_url("cluster")),
            f"--memory-store-url={cluster.url()}",
            "--url=http://bastion.cluster.test",
            *SUITE_FLAGS,
        ]
        first = start_server(flags, tmp_path, name="first")
        try:
            with running(flags, tmp_path, name="second") as second:
                code, output = run_suite(
                    [*suite_args(first, second), "--destructive", "--fuzz-examples", "0"]
                )
        finally:
            first.terminate()
    assert code == 0, output
    passed, failed, _ = totals(output)
    assert failed == 0, output
    assert passed >= 70, output
