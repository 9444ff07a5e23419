"""Issue #36 (11): an authorization code dies with the session that got it. The browser's
session gets a code at ``/authorize`` (or binds an announced one by logging in with the
request's ``state``); the session then ends (logout, or ``revoke_session`` from another
device, on REST, GraphQL and gRPC) and ``/oauth/token`` answers ``invalid_grant``."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import CLIENT_ID, ServerProcess, base_flags, running
from tests.server.test_auth_flows import (
    client_for,
    login,
    session_cookie,
    signup,
    unique_email,
)
from tests.server.test_oauth_flow import REDIRECT, RP, authorize, cookie, location, pkce


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("code-session")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp)),
        "--app-cookie-secure=false",
        f"--allowed-origins={RP}",
    ]
    with running(flags, tmp) as process:
        yield process


@pytest.fixture
def browser(server: ServerProcess) -> Iterator[httpx.Client]:
    with client_for(server) as client:
        yield client


def _code(browser: httpx.Client, session: str, challenge: str) -> str:
    answer = authorize(browser, session, response_type="code", code_challenge=challenge)
    target, query, _ = location(answer)
    assert target == REDIRECT
    return query["code"]


def _redeem(browser: httpx.Client, code: str, verifier: str) -> httpx.Response:
    body = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    return browser.post("/oauth/token", data=body)


def _grpc(server: ServerProcess) -> Iterator[authorizer_pb2_grpc.AuthorizerServiceStub]:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        yield authorizer_pb2_grpc.AuthorizerServiceStub(channel)


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _logout_rest(server: ServerProcess, browser: httpx.Client, signed: httpx.Response) -> None:
    answer = browser.post("/v1/logout", json={}, headers=cookie(session_cookie(signed)))
    assert answer.status_code == 200, answer.text


def _logout_graphql(server: ServerProcess, browser: httpx.Client, signed: httpx.Response) -> None:
    query = {"query": "mutation { logout { message } }"}
    answer = browser.post("/graphql", json=query, headers=cookie(session_cookie(signed)))
    assert "errors" not in answer.json(), answer.text


def _logout_grpc(server: ServerProcess, browser: httpx.Client, signed: httpx.Response) -> None:
    metadata = tuple(_bearer(signed.json()["access_token"]).items())
    for stub in _grpc(server):
        stub.Logout(authorizer_pb2.LogoutRequest(), metadata=metadata, timeout=10)


def _other_device(browser: httpx.Client, signed: httpx.Response) -> tuple[str, str]:
    """A second login of the same user (another device): its access token, and the id of
    the first device's session as the second lists it."""
    mine = _bearer(signed.json()["access_token"])
    listed = browser.get("/v1/sessions", headers=mine).json()["sessions"]
    (first,) = [s["id"] for s in listed if s["current"]]
    other = login(browser, signed.json()["user"]["email"]).json()["access_token"]
    return other, first


def _revoke_rest(server: ServerProcess, browser: httpx.Client, signed: httpx.Response) -> None:
    token, sid = _other_device(browser, signed)
    answer = browser.post("/v1/revoke_session", json={"id": sid}, headers=_bearer(token))
    assert answer.status_code == 200, answer.text


def _revoke_graphql(server: ServerProcess, browser: httpx.Client, signed: httpx.Response) -> None:
    token, sid = _other_device(browser, signed)
    query = {"query": f'mutation {{ revoke_session(id: "{sid}") {{ message }} }}'}
    answer = browser.post("/graphql", json=query, headers=_bearer(token))
    assert "errors" not in answer.json(), answer.text


def _revoke_grpc(server: ServerProcess, browser: httpx.Client, signed: httpx.Response) -> None:
    token, sid = _other_device(browser, signed)
    for stub in _grpc(server):
        stub.RevokeSession(
            authorizer_pb2.RevokeSessionRequest(id=sid),
            metadata=tuple(_bearer(token).items()),
            timeout=10,
        )


ENDINGS: dict[str, Callable[[ServerProcess, httpx.Client, httpx.Response], None]] = {
    "rest logout": _logout_rest,
    "graphql logout": _logout_graphql,
    "grpc logout": _logout_grpc,
    "rest revoke_session": _revoke_rest,
    "graphql revoke_session": _revoke_graphql,
    "grpc revoke_session": _revoke_grpc,
}


def _signed_in(browser: httpx.Client, **login_extra: str) -> httpx.Response:
    email = unique_email("code-session")
    assert signup(browser, email).status_code == 200
    answer = login(browser, email, **login_extra)
    assert answer.status_code == 200, answer.text
    return answer


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_a_code_is_refused_once_its_session_ended(
    server: ServerProcess, browser: httpx.Client, ending: str
) -> None:
    signed = _signed_in(browser)
    verifier, challenge = pkce()
    code = _code(browser, session_cookie(signed), challenge)
    spare = _code(browser, session_cookie(signed), challenge)
    assert _redeem(browser, spare, verifier).status_code == 200  # while the session lives
    ENDINGS[ending](server, browser, signed)
    answer = _redeem(browser, code, verifier)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_grant"


def test_a_code_bound_by_a_login_with_the_state_dies_with_that_login(
    server: ServerProcess, browser: httpx.Client
) -> None:
    verifier, challenge = pkce()
    state = secrets.token_urlsafe(8)
    parked = authorize(browser, None, response_type="code", state=state, code_challenge=challenge)
    announced = location(parked)[1]["code"]
    signed = _signed_in(browser, state=state)
    _logout_rest(server, browser, signed)
    answer = _redeem(browser, announced, verifier)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_grant"
