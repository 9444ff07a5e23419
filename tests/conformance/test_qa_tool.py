"""The conformance tool as a QA engineer meets it (issue 38): a deployment started with the
README's first command's flags (plus a mail sink), no test-only flags, rate limits on."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bastion.conformance.__main__ import main as conformance_main
from bastion.conformance.discovery import NO_ADMIN
from bastion.conformance.fuzz import fuzz, rate_limit
from tests.conformance.test_cross_surface import row, run_suite, suite_args, totals
from tests.dbfixtures import fresh_sqlite_url
from tests.server.certificates import self_signed
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_ID,
    CLIENT_SECRET,
    ServerProcess,
    running,
    start_server,
)
from tests.server.test_http_tls import started_https

HTTP_REQUESTS = re.compile(
    r'^bastion_http_requests_total\{method="(\w+)",route="([^"]*)",status="(\d+)"\} (\S+)$',
    re.MULTILINE,
)

#: A user of the deployment, not of the suite (the README walkthrough's).
REAL_USER = "ada@example.com"


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
    code, output = run_suite([*args, "--fuzz-examples", "1"])
    assert code == 0, output
    passed, failed, _ = totals(output)
    assert failed == 0, output
    assert passed >= 50, output
    for name in ("admin.test_endpoint_receiver", "webhooks.event_delivery_signed"):
        assert row(output, name) == ["skip"] * 3, output
        assert f"{name}: skip: the deployment refuses the suite's receiver" in output
    assert "127.0.0.1 is a loopback address" in output
    assert row(output, "schemathesis.openapi") == ["pass", "n/a", "n/a"], output


def test_only_that_matches_no_row_refuses_to_start() -> None:
    code, output = run_suite(["--only", "no.such.row", *suite_args()])
    assert code == 2
    assert output == "cannot start: --only 'no.such.row' matches no row (--list shows them)\n"


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        conformance_main(["--help"])
    assert exited.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith("usage: bastion-conformance ")
    for command in ("bastion-conformance coverage REPORT.xml", "bastion-conformance openfga"):
        assert command in usage


def test_with_email_verification_and_a_mail_sink_the_password_rows_run(tmp_path: Path) -> None:
    """Sign-up then logs in through the mailed link, so no row skips for a mail sink the
    run was given."""
    placeholder = socket.socket()
    placeholder.bind(("127.0.0.1", 0))
    port = int(placeholder.getsockname()[1])
    flags = [
        *readme_flags(fresh_sqlite_url(tmp_path)),
        "--smtp-host=127.0.0.1",
        f"--smtp-port={port}",
        "--smtp-sender-email=bastion@conformance.example.com",
        "--enable-email-verification=true",
    ]
    with placeholder, running(flags, tmp_path) as server:
        placeholder.close()
        args = [*suite_args(server), "--mail-sink", f"127.0.0.1:{port}", "--fuzz-examples", "0"]
        code, output = run_suite(args)
    assert code == 0, output
    assert "mail sink" not in output.split("Skipped")[-1], output
    for name in (
        "auth.signup_profile_bearer_and_cookie",
        "auth.login_validate_session_logout",
        "mail.signup_verify_email",
    ):
        assert row(output, name) == ["pass"] * 3, output


def test_over_https_with_tls_ca_nothing_fails_fuzzing_included(tmp_path: Path) -> None:
    """--tls-ca reaches every client, schemathesis too; without it a self-signed
    deployment is refused at the start, by name, with exit 2."""
    cert, key = self_signed(tmp_path)
    tls = [f"--tls-cert-file={cert}", f"--tls-key-file={key}"]
    server = start_server([*readme_flags(fresh_sqlite_url(tmp_path)), *tls], tmp_path, wait=False)
    try:
        url = started_https(server, cert)
        args = ["--admin-secret", ADMIN_SECRET, "--client-id", CLIENT_ID, "--base-url", url]
        args += ["--client-secret", CLIENT_SECRET, "--grpc", f"127.0.0.1:{server.grpc_port}"]
        code, output = run_suite([*args, "--only", "meta"])
        assert code == 2
        assert output.startswith(f"cannot start: {url}: "), output
        assert "CERTIFICATE_VERIFY_FAILED" in output
        assert output.endswith("give --tls-ca with its CA)\n"), output
        code, output = run_suite([*args, "--tls-ca", str(tmp_path / "none.pem")])
        assert code == 2
        assert output.startswith(f"cannot start: --tls-ca {tmp_path / 'none.pem'}: "), output
        code, output = run_suite([*args, "--tls-ca", str(cert), "--fuzz-examples", "1"])
    finally:
        server.terminate()
    assert code == 0, output
    assert totals(output)[1] == 0, output
    assert row(output, "schemathesis.openapi") == ["pass", "n/a", "n/a"], output
    assert row(output, "oauth.discovery_and_jwks") == ["pass", "n/a", "n/a"], output


def _answers_by_route(server: ServerProcess) -> dict[str, dict[str, float]]:
    """``{"POST /v1/login": {"200": 3.0, "429": 1.0}, ...}`` from the server's metrics."""
    metrics = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).text
    answers: dict[str, dict[str, float]] = {}
    for method, route, status, count in HTTP_REQUESTS.findall(metrics):
        answers.setdefault(f"{method} {route}", {})[status] = float(count)
    return answers


def test_fuzzing_waits_out_the_rate_limit_like_the_rest(tmp_path: Path) -> None:
    """At 5 requests a second, every operation schemathesis was refused answered it too:
    each 429 was waited out and the request sent again, not taken as the answer."""
    flags = [*readme_flags(fresh_sqlite_url(tmp_path)), "--rate-limit-rps=5"]
    with running([*flags, "--rate-limit-burst=5"], tmp_path) as server:
        result = fuzz(server.url, admin_secret=None, max_examples=1, workdir=tmp_path)
        answers = _answers_by_route(server)
    assert result is not None
    assert result.ok, result.summary
    throttled = {route: counts for route, counts in answers.items() if "429" in counts}
    assert throttled, "the rate limit never answered: the test proves nothing"
    unanswered = [r for r, counts in throttled.items() if set(counts) == {"429"}]
    assert not unanswered, f"only ever refused: {unanswered}"


def test_max_rps_caps_the_fuzzing_too() -> None:
    assert rate_limit(None) == "auto"
    assert rate_limit(12.5) == "12/s"
    assert rate_limit(0.5) == "30/m"


def test_destructive_refuses_a_deployment_with_a_user_it_did_not_create(
    default: Default,
) -> None:
    """A real user signed up before the run: --destructive refuses to start, and the user,
    its token and the audit trail are as they were."""
    with default.server.client() as http:
        body = {"email": REAL_USER, "password": "Str0ng!pass", "confirm_password": "Str0ng!pass"}
        assert http.post("/v1/signup", json=body).status_code == 200
        login = http.post("/v1/login", json={"email": REAL_USER, "password": "Str0ng!pass"})
        token = login.json()["access_token"]
        admin = {"x-service-admin-secret": ADMIN_SECRET}
        page = {"pagination": {"page": 1, "limit": 100}}
        trail = http.post("/v1/admin/audit_logs", json=page, headers=admin).json()
        code, output = run_suite([*suite_args(default.server), "--destructive"])
        assert code == 2, output
        assert output.splitlines()[-1].startswith(
            f"refusing --destructive: the deployment holds users the suite did not create "
            f"({REAL_USER}"
        ), output
        assert http.post("/v1/admin/audit_logs", json=page, headers=admin).json() == trail
        profile = http.get("/v1/profile", headers={"authorization": f"Bearer {token}"})
        assert profile.status_code == 200, profile.text
        user = http.post("/v1/admin/user", json={"email": REAL_USER}, headers=admin).json()
        assert user["email"] == REAL_USER
        assert not user.get("revoked_timestamp"), user


def test_without_any_secret_the_rows_that_need_none_run(default: Default) -> None:
    """No admin or client secret: nothing fails, the public rows pass, every row that
    needs a secret skips saying which."""
    args = ["--base-url", default.server.url, "--grpc", f"127.0.0.1:{default.server.grpc_port}"]
    code, output = run_suite([*args, "--client-id", CLIENT_ID, "--fuzz-examples", "0"])
    assert code == 0, output
    assert totals(output)[1] == 0, output
    for name in ("meta", "auth.login_validate_session_logout", "admin.login_wrong_secret"):
        assert row(output, name) == ["pass"] * 3, output
    assert f"admin.webhooks_crud_and_pagination: skip: {NO_ADMIN}" in output
    assert "oauth.code_pkce_userinfo_introspect_revoke: skip: needs --client-secret" in output
    assert "admin by none (no --admin-secret: admin rows skipped)" in output
    code, output = run_suite([*args, "--client-id", CLIENT_ID, "--destructive"])
    assert code == 2
    assert "cannot start: missing --admin-secret" in output
