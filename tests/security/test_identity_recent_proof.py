"""Changing the recovery address needs a fresh proof (issue 28): with a token from an
older sign-in, update_profile refuses a new email address or phone number unless the
request carries the password, on REST, GraphQL and gRPC alike."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from bastion.service.auth.account import RECENT_SIGN_IN_NEEDED
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.security.conftest import PASSWORD, flags_for
from tests.server.harness import ServerProcess, running

#: A sign-in counts as recent for this long on the test server.
WINDOW = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("recent-proof")
    flags = flags_for("sqlite", tmp, f"--recent-sign-in-seconds={WINDOW}")
    with running(flags, tmp) as srv:
        yield srv


def signed_up(server: ServerProcess) -> tuple[str, str]:
    """A new account's email and the access token of its (now old) first sign-in."""
    email = f"recent{uuid.uuid4().hex[:8]}@example.com"
    with server.client() as http:
        body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
        answer = http.post("/v1/signup", json=body)
    assert answer.status_code == 200, answer.text
    return email, answer.json()["access_token"]


def aged() -> None:
    time.sleep(WINDOW + 1.2)


def update(server: ServerProcess, token: str, **fields: object) -> httpx.Response:
    with server.client() as http:
        return http.post(
            "/v1/update_profile", json=fields, headers={"authorization": f"Bearer {token}"}
        )


def test_a_fresh_sign_in_may_change_the_address(server: ServerProcess) -> None:
    _, token = signed_up(server)
    new = f"fresh{uuid.uuid4().hex[:8]}@example.com"
    answer = update(server, token, email=new)
    assert answer.status_code == 200, answer.text


def test_an_old_token_alone_cannot_change_the_email_or_the_phone(server: ServerProcess) -> None:
    email, token = signed_up(server)
    aged()
    for change in ({"email": f"taken{uuid.uuid4().hex[:8]}@evil.test"},
                   {"phone_number": "+15550100999"}):  # fmt: skip
        refused = update(server, token, **change)
        assert refused.status_code == 403, refused.text
        assert refused.json() == {"code": "permission_denied", "message": RECENT_SIGN_IN_NEEDED}
    with server.client() as http:
        profile = http.get("/v1/profile", headers={"authorization": f"Bearer {token}"}).json()
    assert profile["email"] == email
    assert not profile.get("phone_number")
    # Other profile fields need no fresh proof.
    assert update(server, token, given_name="Still Me").status_code == 200


def test_the_password_is_the_proof_with_an_old_token(server: ServerProcess) -> None:
    _, token = signed_up(server)
    aged()
    new = f"proved{uuid.uuid4().hex[:8]}@example.com"
    wrong = update(server, token, email=new, old_password="Not!theone1")
    assert wrong.status_code == 400
    assert wrong.json()["message"] == "incorrect old password"
    right = update(server, token, email=new, old_password=PASSWORD)
    assert right.status_code == 200, right.text


def test_graphql_and_grpc_refuse_alike(server: ServerProcess) -> None:
    _, token = signed_up(server)
    aged()
    new = f"other{uuid.uuid4().hex[:8]}@evil.test"
    with server.client() as http:
        answer = http.post(
            "/graphql",
            json={
                "query": "mutation($e: String) { update_profile(params: {email: $e}) { message } }",
                "variables": {"e": new},
            },
            headers={"authorization": f"Bearer {token}"},
        )
    errors = answer.json()["errors"]
    assert errors[0]["message"] == RECENT_SIGN_IN_NEEDED
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.UpdateProfile(
                authorizer_pb2.UpdateProfileRequest(email=new),
                metadata=[("authorization", f"Bearer {token}")],
                timeout=10,
            )
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert refused.value.details() == RECENT_SIGN_IN_NEEDED
