"""The conformance tool as a QA engineer meets it (issue 38): a deployment started with the
README's first command's flags (plus a mail sink), no test-only flags, rate limits on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conformance.test_cross_surface import row, run_suite, suite_args, totals
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_ID,
    CLIENT_SECRET,
    ServerProcess,
    running,
)


def readme_flags(database_url: str) -> list[str]:
    """The README's first command's flags, with this test's secrets."""
    return [
        "--database-type=sqlite",
        f"--database-url={database_url}",
        f"--admin-secret={ADMIN_SECRET}",
        f"--client-id={CLIENT_ID}",
        f"--client-secret={CLIENT_SECRET}",
        "--jwt-type=HS256",
        "--jwt-secret=test-jwt-secret-of-sufficient-length",
    ]


@dataclass(frozen=True)
class Default:
    server: ServerProcess
    mail_sink: str


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Default]:
    tmp: Path = tmp_path_factory.mktemp("conformance-default")
    # Held while the server starts so that no other server takes the port.
    placeholder = socket.socket()
    placeholder.bind(("127.0.0.1", 0))
    port = int(placeholder.getsockname()[1])
    mail = [
        "--smtp-host=127.0.0.1",
        f"--smtp-port={port}",
        "--smtp-sender-email=bastion@conformance.example.com",
    ]
    with placeholder, running([*readme_flags(fresh_sqlite_url(tmp)), *mail], tmp) as server:
        placeholder.close()
        yield Default(server, f"127.0.0.1:{port}")


def test_zero_failures_against_a_default_deployment(default: Default) -> None:
    """Every row passes or skips by name; the webhook rows skip quoting the refusal of
    the suite's loopback receiver (the deployment does not call private targets)."""
    args = [*suite_args(default.server), "--mail-sink", default.mail_sink]
    code, output = run_suite([*args, "--fuzz-examples", "2"])
    assert code == 0, output
    passed, failed, _ = totals(output)
    assert failed == 0, output
    assert passed >= 50, output
    for name in ("admin.test_endpoint_receiver", "webhooks.event_delivery_signed"):
        assert row(output, name) == ["skip"] * 3, output
        assert f"{name}: skip: the deployment refuses the suite's receiver" in output
    assert "127.0.0.1 is a loopback address" in output
    assert row(output, "schemathesis.openapi") == ["pass", "n/a", "n/a"], output
