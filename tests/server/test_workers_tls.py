"""``--workers 2`` with TLS: the one ``/metrics`` (HTTPS, as a single process serves it)
reports both workers; the parent writes JSON lines like its workers (a killed worker is
named with its signal), and worker start lines name the public /metrics, never their
internal listener."""

from __future__ import annotations

import json
import os
import signal
import ssl
from pathlib import Path

import httpx

from tests.dbfixtures import fresh_sqlite_url
from tests.server.certificates import self_signed
from tests.server.harness import base_flags, start_server
from tests.server.test_http_tls import started_https
from tests.server.test_workers import children, wait_for


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def workers_reported(metrics: str) -> set[str]:
    return {
        line.split('worker="', 1)[1].split('"', 1)[0]
        for line in metrics.splitlines()
        if line.startswith("bastion_build_info{")
    }


def test_tls_workers_report_metrics_and_the_parent_logs_json(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    flags = [
        *(
            flag
            for flag in base_flags("sqlite", fresh_sqlite_url(tmp_path, "tls-workers"))
            if not flag.startswith("--log-level")
        ),
        "--workers=2",
        "--log-level=info",
        "--log-format=json",
        f"--tls-cert-file={cert}",
        f"--tls-key-file={key}",
        "--url=https://127.0.0.1",
    ]
    server = start_server(flags, tmp_path, wait=False, name="tls-workers")
    try:
        started_https(server, cert)
        wait_for(lambda: len(children(server.process.pid)) == 2)
        trust = ssl.create_default_context(cafile=str(cert))
        metrics_url = f"https://127.0.0.1:{server.metrics_port}/metrics"
        wait_for(lambda: workers_reported(httpx.get(metrics_url, verify=trust).text) == {"0", "1"})

        victim = min(children(server.process.pid))
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: "worker exited" in server.stderr())
        wait_for(lambda: server.stderr().count('"msg": "bastion listening"') == 3)
    finally:
        server.terminate()
    lines = json_lines(server.stderr())
    (exited,) = [line for line in lines if line["msg"] == "worker exited; starting another"]
    assert (exited["level"], exited["logger"]) == ("warning", "bastion.workers"), exited
    assert (exited["signal"], exited["pid"]) == ("SIGKILL", victim), exited
    assert "time" in exited
    assert exited["worker"] in (0, 1)
    started = [line for line in lines if line["msg"] == "bastion listening"]
    assert sorted(line["worker"] for line in started) == sorted([0, 1, exited["worker"]])
    assert {line["metrics"] for line in started} == {metrics_url}, started
