"""CI for the cross-surface conformance suite: ``python -m bastion.conformance`` against real
servers.

Three deployments, as issue 9 asks: SQLite with the SQL-backed memory store; two server
processes sharing PostgreSQL + Redis with every call alternating between them; and a
server without the authorization engine (``--fga-store=none``) for the
``failed_precondition`` rows. Then the suite's own promise: a surface that answers
differently makes it fail, with both answers shown.
"""

from __future__ import annotations

import io
import re
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bastion.conformance.catalogue import CATALOGUE
from bastion.conformance.catalogue.mail import NO_SINK
from bastion.conformance.catalogue.oauth import REFRESH_GRACE_SECONDS
from bastion.conformance.catalogue.sms import NO_SINK as NO_SMS_SINK
from bastion.conformance.cli import main
from bastion.conformance.operations import Operation
from bastion.conformance.outcome import Credentials, Outcome
from bastion.conformance.pacing import Pacer, http_wait
from bastion.conformance.profiles import PROFILES, profile_for
from bastion.conformance.surfaces import GraphQLSurface, GrpcSurface, RestSurface
from bastion.conformance.surfaces.base import Surface
from tests.dbfixtures import fresh_postgres_url, fresh_redis_url, fresh_sqlite_url
from tests.fakes.twilio import ACCOUNT_SID as TWILIO_ACCOUNT
from tests.fakes.twilio import API_KEY as TWILIO_KEY
from tests.fakes.twilio import API_SECRET as TWILIO_SECRET
from tests.fakes.twilio import FakeTwilio
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_ID,
    CLIENT_SECRET,
    ServerProcess,
    base_flags,
    running,
    start_server,
)

TOTALS = re.compile(r"^(\d+) passed, (\d+) failed, (\d+) skipped$")
#: What the suite needs of a local deployment: its own webhook receiver is on loopback.
SUITE_FLAGS = ["--webhook-allow-private-targets=true", "--app-cookie-secure=false"]


#: Which test here runs a deployment of each profile and asserts its rows passed.
CI_PROFILES = {
    "default": "test_whole_suite_destructive_on_sqlite_with_default_rate_limits",
    "sms": "test_two_processes_on_postgres_and_redis_with_mail_and_sms",
    "mail": "test_email_rows_through_the_suites_own_mail_sink",
    "mfa-email": "test_otp_rows_for_emailed_codes_and_authenticator_apps",
    "mfa-totp": "test_otp_rows_for_emailed_codes_and_authenticator_apps",
    "fga-off": "test_without_the_engine_every_engine_operation_is_failed_precondition",
    "passkeys": "test_passkey_rows_agree_across_the_surfaces",
}


def default_flags(kind: str, url: str) -> list[str]:
    """Every required flag and nothing else: rate limits as they come."""
    return [f for f in base_flags(kind, url) if not f.startswith("--rate-limit-")]


def assert_covered(output: str, profile: str) -> None:
    """Every row of ``profile`` passed on at least one surface of this run."""
    rows = [s.name for s in CATALOGUE if profile_for(s.name).name == profile]
    assert rows
    missing = [name for name in rows if "pass" not in row(output, name)]
    assert not missing, f"rows of profile {profile} not covered: {missing}\n{output}"


def suite_args(*servers: ServerProcess) -> list[str]:
    args = ["--admin-secret", ADMIN_SECRET, "--client-id", CLIENT_ID]
    args += ["--client-secret", CLIENT_SECRET]
    for server in servers:
        args += ["--base-url", server.url, "--grpc", f"127.0.0.1:{server.grpc_port}"]
    return args


def run_suite(
    args: list[str], surfaces: dict[str, Surface | None] | None = None
) -> tuple[int, str]:
    out = io.StringIO()
    code = main(args, out=out, surfaces=surfaces)
    return code, out.getvalue()


def totals(output: str) -> tuple[int, int, int]:
    last = output.rstrip("\n").splitlines()[-1]
    match = TOTALS.match(last)
    assert match, f"last line is {last!r}"
    passed, failed, skipped = (int(g) for g in match.groups())
    return passed, failed, skipped


def row(output: str, scenario: str) -> list[str]:
    """The rest/graphql/grpc cells of one row of the table."""
    for line in output.splitlines():
        parts = line.split()
        if parts and parts[0] == scenario:
            return parts[1:4]
    raise AssertionError(f"no row {scenario} in:\n{output}")


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("conformance-sqlite")
    flags = [*default_flags("sqlite", fresh_sqlite_url(tmp)), *SUITE_FLAGS]
    with running(flags, tmp) as server:
        yield server


def test_whole_suite_destructive_on_sqlite_with_default_rate_limits(
    sqlite_server: ServerProcess, tmp_path: Path
) -> None:
    """A deployment as it comes (rate limits on): the suite paces itself, nothing fails,
    every row of the default profile passes somewhere, schemathesis included."""
    junit = tmp_path / "conformance.xml"
    args = [*suite_args(sqlite_server), "--destructive", "--junit", str(junit)]
    code, output = run_suite([*args, "--fuzz-examples", "1"])
    assert code == 0, output
    passed, failed, skipped = totals(output)
    assert failed == 0, output
    assert passed >= 50, output
    # Every surface ran the engine scenario with --destructive; gRPC is n/a on HTTP rows.
    assert row(output, "fga.model_tuples_check_list_reset") == ["pass", "pass", "pass"]
    assert row(output, "http.csrf_origin_required") == ["pass", "pass", "n/a"]
    assert row(output, "schemathesis.openapi") == ["pass", "n/a", "n/a"]
    assert row(output, "oauth.code_pkce_userinfo_introspect_revoke") == ["pass", "n/a", "n/a"]
    assert row(output, "sessions.revocation_seen_on_every_instance") == ["pass"] * 3
    assert_covered(output, "default")
    assert "fga.not_enabled_failed_precondition: skip: the authorization engine is on" in output
    # No --mail-sink: the email rows say why they did not run.
    assert f"mail.invite_members: skip: {NO_SINK}" in output
    assert f"sms.mfa_login: skip: {NO_SMS_SINK}" in output
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "0"
    assert int(suite.get("tests") or 0) == passed + failed + skipped
    names = {case.get("name") for case in suite.iter("testcase")}
    assert {"meta", "auth.signup_profile_bearer_and_cookie", "admin.cookie_session"} <= names
    # Each case's time is its own: the refresh row waits out the reuse grace window.
    seconds = {case.get("name"): float(case.get("time") or -1) for case in suite.iter("testcase")}
    assert seconds["oauth.refresh_rotation_and_reuse"] > REFRESH_GRACE_SECONDS, seconds
    assert all(value >= 0 for value in seconds.values()), seconds


MAIL_ROWS = (
    "mail.signup_verify_email",
    "mail.signup_verified_elsewhere",
    "mail.resend_verify_email",
    "mail.magic_link_login",
    "mail.forgot_reset_password",
    "mail.invite_members",
)


def test_email_rows_through_the_suites_own_mail_sink(tmp_path: Path) -> None:
    """The deployment mails the suite's sink; every surface follows every emailed link."""
    # Held (bound, not listening) while the server starts, so no other server takes it;
    # released just before the suite binds its sink there.
    placeholder = socket.socket()
    placeholder.bind(("127.0.0.1", 0))
    port = int(placeholder.getsockname()[1])
    mail = [
        "--smtp-host=127.0.0.1",
        f"--smtp-port={port}",
        "--smtp-sender-email=bastion@conformance.example.com",
        "--enable-email-verification=true",
        "--enable-magic-link-login=true",
    ]
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp_path)), *SUITE_FLAGS, *mail]
    with placeholder, running(flags, tmp_path) as server:
        placeholder.close()
        args = [*suite_args(server), "--mail-sink", f"127.0.0.1:{port}", "--only", "mail.*"]
        code, output = run_suite([*args, "--fuzz-examples", "0"])
    for scenario in MAIL_ROWS[:-1]:
        assert row(output, scenario) == ["pass", "pass", "pass"], output
    assert row(output, "mail.invite_members") == ["pass", "pass", "pass"], output
    assert code == 0, output
    assert totals(output) == (3 * len(MAIL_ROWS), 0, 0)
    assert f"mail sink 127.0.0.1:{port}" in output
    assert_covered(output, "mail")


def test_otp_rows_for_emailed_codes_and_authenticator_apps(tmp_path: Path) -> None:
    """verify_otp / resend_otp agree across the surfaces: an emailed code through the
    suite's own sink on one deployment, an authenticator app (pyotp) on another; each
    skips, by name, the method its deployment does not use."""
    placeholder = socket.socket()
    placeholder.bind(("127.0.0.1", 0))
    port = int(placeholder.getsockname()[1])
    mail = [
        "--smtp-host=127.0.0.1",
        f"--smtp-port={port}",
        "--smtp-sender-email=bastion@conformance.example.com",
    ]
    optional_mfa = ["--enable-mfa", "--enforce-mfa=false"]
    email_flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path, "otp-email")),
        *SUITE_FLAGS,
        *mail,
        *optional_mfa,
        "--enable-email-otp",
    ]
    with placeholder, running(email_flags, tmp_path, name="otp-email") as server:
        placeholder.close()
        args = [*suite_args(server), "--mail-sink", f"127.0.0.1:{port}", "--only", "mfa.*"]
        code, output = run_suite([*args, "--fuzz-examples", "0"])
    assert code == 0, output
    assert row(output, "mfa.email_otp_verify_and_resend") == ["pass", "pass", "pass"], output
    assert row(output, "mfa.email_otp_setup") == ["pass", "pass", "pass"], output
    assert_covered(output, "mfa-email")
    assert "mfa.totp_enrol_and_verify: skip: this deployment challenges by email_otp_screen" in (
        output
    )
    totp_flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path, "otp-totp")),
        *SUITE_FLAGS,
        *optional_mfa,
        "--enable-totp-login",
    ]
    with running(totp_flags, tmp_path, name="otp-totp") as server:
        code, output = run_suite([*suite_args(server), "--only", "mfa.*", "--fuzz-examples", "0"])
    assert code == 0, output
    assert row(output, "mfa.totp_enrol_and_verify") == ["pass", "pass", "pass"], output
    for setup in ("mfa.totp_setup", "mfa.totp_skip_setup", "mfa.totp_lock"):
        assert row(output, setup) == ["pass", "pass", "pass"], output
    assert_covered(output, "mfa-totp")
    assert f"mfa.email_otp_verify_and_resend: skip: {NO_SINK}" in output


def test_passkey_rows_agree_across_the_surfaces(
    tmp_path: Path, sqlite_server: ServerProcess
) -> None:
    """Registration, passwordless sign-in, every refusal and the admin rows answer alike
    on REST, GraphQL and gRPC; a deployment without passkeys skips them by name."""
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp_path, "passkeys")),
        *SUITE_FLAGS,
        "--enable-passkeys",
        "--enable-mfa",
        "--enforce-mfa=false",
        "--enable-totp-login",
    ]
    with running(flags, tmp_path, name="passkeys") as server:
        code, output = run_suite(
            [*suite_args(server), "--only", "passkeys.*", "--fuzz-examples", "0"]
        )
    assert code == 0, output
    for name in (
        "passkeys.register_list_rename_delete",
        "passkeys.passwordless_sign_in_and_refusals",
        "passkeys.admin_lists_and_deletes",
        "passkeys.second_factor_parks_for_the_passkey",
    ):
        assert row(output, name) == ["pass", "pass", "pass"], output
    assert_covered(output, "passkeys")
    code, output = run_suite(
        [*suite_args(sqlite_server), "--only", "passkeys.*", "--fuzz-examples", "0"]
    )
    assert code == 0, output
    assert "passkeys.admin_lists_and_deletes: skip: --enable-passkeys is off" in output


SMS_ROWS = (
    "sms.phone_signup_verify_otp",
    "sms.forgot_reset_password_by_phone",
    "sms.mfa_login",
    "sms.mfa_otp_setup",
)


def held_port() -> socket.socket:
    """A bound (not listening) socket: no other server takes its port while the
    deployment starts; closed just before the suite binds its sink there."""
    placeholder = socket.socket()
    placeholder.bind(("127.0.0.1", 0))
    return placeholder


def test_sms_rows_skip_by_name_when_the_deployment_texts_elsewhere(tmp_path: Path) -> None:
    """The deployment texts through another provider URL: the first wait for a text ends
    with the sink never reached, and every SMS row says so (the rest without waiting)."""
    placeholder = held_port()
    port = int(placeholder.getsockname()[1])
    placeholder.close()
    with FakeTwilio() as elsewhere:
        sms = [
            f"--sms-account-sid={TWILIO_ACCOUNT}",
            f"--sms-api-key={TWILIO_KEY}",
            f"--sms-api-secret={TWILIO_SECRET}",
            "--sms-sender=+15550001111",
            f"--sms-api-url={elsewhere.url}",
            "--enable-phone-verification=true",
        ]
        flags = [*base_flags("sqlite", fresh_sqlite_url(tmp_path)), *SUITE_FLAGS, *sms]
        with running(flags, tmp_path) as server:
            args = [*suite_args(server), "--sms-sink", f"127.0.0.1:{port}", "--only", "sms.*"]
            code, output = run_suite([*args, "--fuzz-examples", "0"])
        assert elsewhere.messages  # it did text, just not through the suite's sink
    assert code == 0, output
    unreached = f"no text from the deployment reached the suite's SMS sink at 127.0.0.1:{port}"
    for scenario in SMS_ROWS:
        assert row(output, scenario) == ["skip", "skip", "skip"], output
        assert f"{scenario}: skip: {unreached}" in output


def test_sms_rows_skip_by_name_when_sms_is_off(sqlite_server: ServerProcess) -> None:
    """A sink given to a deployment without SMS: each row names what is off."""
    placeholder = held_port()
    port = int(placeholder.getsockname()[1])
    placeholder.close()
    args = [*suite_args(sqlite_server), "--sms-sink", f"127.0.0.1:{port}", "--only", "sms.*"]
    code, output = run_suite([*args, "--fuzz-examples", "0"])
    assert code == 0, output
    assert "sms.phone_signup_verify_otp: skip: is_phone_verification_enabled is off" in output
    assert "sms.mfa_login: skip: is_multi_factor_auth_enabled is off" in output
    assert "sms.forgot_reset_password_by_phone: skip: forgot_password by phone: SMS service " in (
        output
    )


def admin_post(http: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    """An admin call on the shared rate-limited deployment: a throttle (the suite runs
    before may have spent the bucket) is waited out as the suite itself does."""
    admin = {"x-service-admin-secret": ADMIN_SECRET}
    return Pacer().send_raw(lambda: http.post(path, json=body, headers=admin), http_wait)


def test_destructive_refuses_a_store_that_holds_tuples(
    sqlite_server: ServerProcess, tmp_path: Path
) -> None:
    model = "model\n  schema 1.1\n\ntype user\n\ntype document\n  relations\n"
    model += "    define viewer: [user]\n"
    tuples = {"tuples": [{"user": "user:kept", "relation": "viewer", "object": "document:kept"}]}
    with sqlite_server.client() as http:
        assert admin_post(http, "/v1/admin/fga/model", {"dsl": model}).is_success
        assert admin_post(http, "/v1/admin/fga/tuples", tuples).is_success
        try:
            code, output = run_suite([*suite_args(sqlite_server), "--destructive"])
            assert code == 2
            assert "refusing --destructive: the authorization store already holds tuples" in output
            # Without --destructive the same store is fine: nothing global is touched.
            code, output = run_suite([*suite_args(sqlite_server), "--only", "fga.*"])
            assert code == 0, output
            assert row(output, "fga.model_tuples_check_list_reset") == ["skip"] * 3
        finally:
            assert admin_post(http, "/v1/admin/fga/tuples/delete", tuples).is_success


def test_two_processes_on_postgres_and_redis_with_mail_and_sms(tmp_path: Path) -> None:
    """Two processes behind one public URL sharing PostgreSQL + Redis, rate limits on,
    mailing and texting the suite's own sinks; every call alternates between them."""
    database, memory = fresh_postgres_url("conformance"), fresh_redis_url()
    mail_hold, sms_hold = held_port(), held_port()
    mail_port, sms_port = (int(h.getsockname()[1]) for h in (mail_hold, sms_hold))
    # Instances behind one name share their public URL: it is the tokens' issuer.
    shared = ["--url=http://bastion.conformance.test", f"--memory-store-url={memory}"]
    sinks = [
        "--smtp-host=127.0.0.1",
        f"--smtp-port={mail_port}",
        "--smtp-sender-email=bastion@conformance.example.com",
        "--enable-magic-link-login=true",
        "--sms-account-sid=AC-conformance",
        "--sms-api-key=SK-conformance",
        "--sms-api-secret=conformance-secret",
        "--sms-sender=+15550001111",
        f"--sms-api-url=http://127.0.0.1:{sms_port}",
        "--enable-phone-verification=true",
        "--enable-mfa=true",
        "--enable-sms-otp=true",
        "--enforce-mfa=false",
    ]
    flags = [*default_flags("postgres", database), *shared, *SUITE_FLAGS, *sinks]
    with mail_hold, sms_hold:
        first = start_server(flags, tmp_path, name="first")
        try:
            with running(flags, tmp_path, name="second") as second:
                mail_hold.close()
                sms_hold.close()
                args = [
                    *suite_args(first, second),
                    "--destructive",
                    "--fuzz-examples",
                    "0",
                    "--mail-sink",
                    f"127.0.0.1:{mail_port}",
                    "--sms-sink",
                    f"127.0.0.1:{sms_port}",
                ]
                code, output = run_suite(args)
        finally:
            first.terminate()
    assert code == 0, output
    passed, failed, _ = totals(output)
    assert failed == 0
    assert passed >= 90, output
    # A cookie minted by one process is honoured by the other: the admin cookie session
    # logs in on one and is renewed and ended on the next.
    assert row(output, "admin.cookie_session") == ["pass", "pass", "pass"]
    for scenario in (*SMS_ROWS, "mail.magic_link_login", "mail.forgot_reset_password"):
        assert row(output, scenario) == ["pass", "pass", "pass"], output
    assert_covered(output, "sms")
    assert_covered(output, "default")


def test_every_profile_has_a_deployment_in_ci() -> None:
    """Each profile's rows are asserted covered by one test here, so the runs together
    leave no row uncovered."""
    assert set(CI_PROFILES) == {p.name for p in PROFILES}
    for test in CI_PROFILES.values():
        assert test in globals(), test


def test_without_the_engine_every_engine_operation_is_failed_precondition(
    tmp_path: Path,
) -> None:
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp_path)), "--fga-store=none", *SUITE_FLAGS]
    with running(flags, tmp_path) as server:
        code, output = run_suite([*suite_args(server), "--destructive", "--only", "fga.*"])
    assert code == 0, output
    assert row(output, "fga.not_enabled_failed_precondition") == ["pass", "pass", "pass"]
    assert_covered(output, "fga-off")
    assert row(output, "fga.check_permissions_limits") == ["skip"] * 3
    assert "the authorization engine is off on this deployment" in output


class Misanswering:
    """Wraps one real surface and changes its answer to one operation."""

    def __init__(self, inner: Surface, operation: str) -> None:
        self.inner, self.operation, self.name = inner, operation, inner.name

    def call(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        outcome = self.inner.call(operation, request, credentials)
        if operation.name == self.operation and outcome.ok:
            outcome.body = {**outcome.body, "client_id": "someone-else"}
        return outcome

    def close(self) -> None:
        self.inner.close()


def test_a_surface_that_answers_differently_fails_with_both_answers(
    sqlite_server: ServerProcess,
) -> None:
    grpc = GrpcSurface([f"127.0.0.1:{sqlite_server.grpc_port}"])
    surfaces: dict[str, Surface | None] = {
        "rest": RestSurface([sqlite_server.url]),
        "graphql": GraphQLSurface([sqlite_server.url]),
        "grpc": Misanswering(grpc, "meta"),
    }
    code, output = run_suite(
        [*suite_args(sqlite_server), "--only", "meta", "--fuzz-examples", "0"], surfaces
    )
    assert code == 1
    assert row(output, "meta") == ["pass", "pass", "fail"]
    assert totals(output) == (2, 1, 0)
    report = output.split("Disagreements between surfaces:", 1)[1]
    lines = [line.strip() for line in report.splitlines()]
    assert "meta, step 1 (meta):" in lines
    answers = {
        line.split(" ", 1)[0]: line
        for line in lines
        if line.startswith(("rest", "graphql", "grpc"))
    }
    assert '"client_id": "test-client"' in answers["rest"]
    assert '"client_id": "test-client"' in answers["graphql"]
    assert '"client_id": "someone-else"' in answers["grpc"]


def test_the_suite_waits_out_a_tight_rate_limit_and_says_what_it_cost(tmp_path: Path) -> None:
    """One request a second: the suite's first calls are refused with the deployment's
    before-effect mark, and it waits them out instead of failing."""
    flags = [
        *default_flags("sqlite", fresh_sqlite_url(tmp_path)),
        *SUITE_FLAGS,
        "--rate-limit-rps=1",
        "--rate-limit-burst=2",
    ]
    with running(flags, tmp_path) as server:
        code, output = run_suite([*suite_args(server), "--only", "meta", "--fuzz-examples", "0"])
    assert code == 0, output
    assert totals(output) == (3, 0, 0)
    pacing = re.search(
        r"^pacing: (\d+) waits for the deployment's rate limit, ([\d.]+) s", output, re.M
    )
    assert pacing, output
    assert int(pacing.group(1)) > 0
    assert float(pacing.group(2)) > 0
