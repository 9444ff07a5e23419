"""The suite's newer rows fail against a deployment made wrong in one behaviour each: a
proxy rewrites one kind of answer (HTTP-only rows), a wrapped client misanswers one
operation (rows on every surface), or the suite is given the wrong signing secret."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bastion.conformance.operations import Operation
from bastion.conformance.outcome import Credentials, Outcome
from bastion.conformance.surfaces import GraphQLSurface, GrpcSurface, RestSurface
from bastion.conformance.surfaces.base import Surface
from tests.conformance.rewriting_proxy import Answer, rewriting
from tests.conformance.test_cross_surface import (
    SUITE_FLAGS,
    default_flags,
    row,
    run_suite,
    suite_args,
)
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import ADMIN_SECRET, CLIENT_ID, CLIENT_SECRET, ServerProcess, running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("broken-rows")
    flags = [*default_flags("sqlite", fresh_sqlite_url(tmp)), *SUITE_FLAGS]
    with running(flags, tmp) as deployment:
        yield deployment


def _json(answer: Answer, change: Any) -> Answer:
    body = json.loads(answer.body)
    change(body)
    return Answer(answer.status, answer.headers, json.dumps(body).encode())


def symmetric_key_in_jwks(method: str, path: str, answer: Answer) -> Answer:
    if path.startswith("/.well-known/jwks.json"):
        key = {"kty": "oct", "k": "c2VjcmV0", "kid": "leak", "alg": "HS256"}
        return _json(answer, lambda body: body["keys"].append(key))
    return answer


def userinfo_without_email(method: str, path: str, answer: Answer) -> Answer:
    if path.startswith("/userinfo") and answer.status == 200:
        return _json(answer, lambda body: body.pop("email", None))
    return answer


def token_without_rotation(method: str, path: str, answer: Answer) -> Answer:
    if path.startswith("/oauth/token") and answer.status == 200:
        return _json(answer, lambda body: body.pop("refresh_token", None))
    return answer


def logout_keeps_the_cookie(method: str, path: str, answer: Answer) -> Answer:
    if path.startswith("/logout"):
        kept = [(k, v) for k, v in answer.headers if k.lower() != "set-cookie"]
        return Answer(answer.status, kept, answer.body)
    return answer


def pages_without_csrf_token(method: str, path: str, answer: Answer) -> Answer:
    if path.startswith("/app") and b"csrf_token" in answer.body:
        stripped = re.sub(rb'<input type="hidden" name="csrf_token"[^>]*>', b"", answer.body)
        return Answer(answer.status, answer.headers, stripped)
    return answer


def sessions_page_without_sign_out(method: str, path: str, answer: Answer) -> Answer:
    if method == "GET" and path.startswith("/app/sessions"):
        stripped = re.sub(rb'<form method="post" action="/app/sessions/revoke">.*?</form>',
                          b"", answer.body, flags=re.S)  # fmt: skip
        return Answer(answer.status, answer.headers, stripped)
    return answer


BROKEN_HTTP = [
    ("oauth.discovery_and_jwks", symmetric_key_in_jwks, "'k': 'c2VjcmV0'"),
    ("oauth.code_pkce_userinfo_introspect_revoke", userinfo_without_email, "userinfo"),
    ("oauth.refresh_rotation_and_reuse", token_without_rotation, "did not rotate"),
    ("oauth.rp_initiated_logout", logout_keeps_the_cookie, "left the session cookie"),
    ("pages.signup_profile_logout_login", pages_without_csrf_token, "carries no csrf_token"),
    (
        "pages.sessions_sign_out_another_device",
        sessions_page_without_sign_out,
        "0 sign-out forms",
    ),
]


@pytest.mark.parametrize(
    ("scenario", "rewrite", "reason"), BROKEN_HTTP, ids=[s for s, *_ in BROKEN_HTTP]
)
def test_an_http_only_row_fails_when_its_behaviour_breaks(
    server: ServerProcess, scenario: str, rewrite: Any, reason: str
) -> None:
    with rewriting(server.url, rewrite) as proxy:
        args = [
            "--admin-secret",
            ADMIN_SECRET,
            "--client-id",
            CLIENT_ID,
            "--client-secret",
            CLIENT_SECRET,
            "--base-url",
            proxy,
            "--only",
            scenario,
            "--fuzz-examples",
            "0",
        ]
        code, output = run_suite(args)
    assert code == 1, output
    assert row(output, scenario) == ["fail", "n/a", "n/a"], output
    failure = output.split("Failures:", 1)[1].split("\n\n", 1)[0]
    assert reason in failure, failure


class Misanswering:
    """A real gRPC client whose answers to one operation are changed."""

    def __init__(self, inner: Surface, operation: str, change: Any) -> None:
        self.inner, self.operation, self.change = inner, operation, change
        self.name = inner.name

    def call(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        outcome = self.inner.call(operation, request, credentials)
        if operation.name == self.operation:
            return self.change(outcome)
        return outcome

    def close(self) -> None:
        self.inner.close()


def one_object_fewer(outcome: Outcome) -> Outcome:
    if outcome.ok and outcome.body.get("objects"):
        outcome.body = {**outcome.body, "objects": outcome.body["objects"][1:]}
    return outcome


def still_signed_in(outcome: Outcome) -> Outcome:
    if not outcome.ok and outcome.code == "unauthenticated":
        return Outcome(ok=True, body={"email": "someone@example.com"})
    return outcome


BROKEN_EVERYWHERE = [
    ("fga.list_objects_users_expand", "list_permissions", one_object_fewer),
    ("sessions.revocation_seen_on_every_instance", "profile", still_signed_in),
]
#: What the failing grpc cell says for each.
REASONS = {
    "fga.list_objects_users_expand": "list_permissions",
    "sessions.revocation_seen_on_every_instance": "expected error unauthenticated",
}


@pytest.mark.parametrize(
    ("scenario", "operation", "change"), BROKEN_EVERYWHERE, ids=[s for s, *_ in BROKEN_EVERYWHERE]
)
def test_a_row_on_every_surface_fails_where_one_surface_breaks(
    server: ServerProcess, scenario: str, operation: str, change: Any
) -> None:
    grpc = GrpcSurface([f"127.0.0.1:{server.grpc_port}"])
    surfaces: dict[str, Surface | None] = {
        "rest": RestSurface([server.url]),
        "graphql": GraphQLSurface([server.url]),
        "grpc": Misanswering(grpc, operation, change),
    }
    args = [*suite_args(server), "--only", scenario, "--destructive", "--fuzz-examples", "0"]
    code, output = run_suite(args, surfaces)
    assert code == 1, output
    assert row(output, scenario) == ["pass", "pass", "fail"], output
    assert f"{scenario} [grpc]: " in output
    assert REASONS[scenario] in output.split(f"{scenario} [grpc]: ", 1)[1].splitlines()[0]


def test_webhook_deliveries_that_do_not_verify_fail_the_row(server: ServerProcess) -> None:
    """Signed with another secret than the suite expects: the signature check fails."""
    args = [*suite_args(server), "--only", "webhooks.*", "--fuzz-examples", "0"]
    secret_at = args.index("--client-secret") + 1
    args[secret_at] = "not-the-deployments-secret"
    code, output = run_suite(args)
    assert code == 1, output
    assert row(output, "webhooks.event_delivery_signed") == ["fail"] * 3, output
    assert "does not verify with the client secret" in output
