"""The metrics an operator graphs: the build, logins by outcome, tokens minted, and the
outbox (items by kind and outcome, webhook delivery failures among them; its backlog)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, free_port, running

PASSWORD = "Metrics!pass1"
ADMIN = {"x-service-admin-secret": ADMIN_SECRET}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("operator-metrics")
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp)), "--webhook-allow-private-targets"]
    with running(flags, tmp) as srv:
        yield srv


def samples(server: ServerProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).text
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def value(server: ServerProcess, name: str, **labels: str) -> float:
    return samples(server).get((name, tuple(sorted(labels.items()))), 0.0)


def test_the_build_is_named(server: ServerProcess) -> None:
    builds = [key for key in samples(server) if key[0] == "bastion_build_info"]
    (build,) = builds
    assert dict(build[1])["version"]


def test_logins_and_tokens_are_counted_by_outcome_and_kind(server: ServerProcess) -> None:
    before = {
        outcome: value(server, "bastion_logins_total", identifier="email", outcome=outcome)
        for outcome in ("signed_in", "refused")
    }
    access_before = value(server, "bastion_tokens_issued_total", kind="access")
    email = f"metrics-{time.time_ns()}@example.com"
    with server.client() as http:
        body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
        assert http.post("/v1/signup", json=body).status_code == 200
        assert http.post("/v1/login", json={"email": email, "password": PASSWORD}).is_success
        wrong = http.post("/v1/login", json={"email": email, "password": "Wrong!pass1"})
        assert wrong.status_code == 401
    after = {
        outcome: value(server, "bastion_logins_total", identifier="email", outcome=outcome)
        for outcome in ("signed_in", "refused")
    }
    assert after == {"signed_in": before["signed_in"] + 1, "refused": before["refused"] + 1}
    # The sign-up and the login each minted an access token.
    assert value(server, "bastion_tokens_issued_total", kind="access") == access_before + 2


def test_webhook_delivery_failures_show_in_the_outbox_metrics(server: ServerProcess) -> None:
    dead = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    with server.client() as http:
        added = http.post(
            "/v1/admin/add_webhook",
            json={"event_name": "user.signup", "endpoint": dead, "enabled": True},
            headers=ADMIN,
        )
        assert added.status_code == 200, added.text
        email = f"hooked-{time.time_ns()}@example.com"
        body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
        assert http.post("/v1/signup", json=body).status_code == 200
    deadline = time.monotonic() + 30
    retried = 0.0
    while time.monotonic() < deadline:
        retried = value(
            server, "bastion_outbox_items_total", kind="webhook_delivery", outcome="retried"
        )
        if retried:
            break
        time.sleep(0.2)
    assert retried >= 1
    # The fan-out that queued the delivery was delivered itself.
    assert (
        value(server, "bastion_outbox_items_total", kind="webhook_event", outcome="delivered") >= 1
    )
    # The retry waits in the outbox: the backlog shows it, with its age.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not value(server, "bastion_outbox_backlog"):
        time.sleep(0.2)
    assert value(server, "bastion_outbox_backlog") >= 1
    assert ("bastion_outbox_oldest_age_seconds", ()) in samples(server)
