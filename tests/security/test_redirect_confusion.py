"""Issue #36 (1): a redirect target that Python's ``urlsplit`` reads as ours but a browser
reads as another host (``http://127.0.0.1:<attacker>\\@127.0.0.1:<us>/cb``: WHATWG URL
turns ``\\`` into ``/``). Every entry point that takes a redirect URL refuses it, on REST,
GraphQL and gRPC, and no answer sends a browser there. One real server (SQLite, real SMTP
into a mail sink); the Chromium test follows such a redirect in a real browser
(tests/server/test_redirects_browser.py)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import ada_url
import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_sqlite_url
from tests.mailsink import SpooledMailSink
from tests.server.harness import CLIENT_ID, ServerProcess, base_flags, free_port, start_server
from tests.server.test_auth_flows import (
    client_for,
    link_in,
    mails_to,
    session_cookie,
    signup,
    unique_email,
    with_cookie,
)

VERIFIER = "v" * 50
CHALLENGE = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=")


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServerProcess, SpooledMailSink]]:
    tmp: Path = tmp_path_factory.mktemp("redirect-confusion")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    try:
        process = start_server(
            [
                *base_flags("sqlite", fresh_sqlite_url(tmp, "redirects")),
                "--smtp-host=127.0.0.1",
                f"--smtp-port={sink.port}",
                "--smtp-sender-email=bastion@example.com",
                "--app-cookie-secure=false",
                "--enable-magic-link-login",
            ],
            tmp,
            name="redirects",
        )
    except BaseException:
        sink.stop()
        raise
    try:
        yield process, sink
    finally:
        process.terminate()
        sink.stop()


@pytest.fixture
def client(server: tuple[ServerProcess, SpooledMailSink]) -> Iterator[httpx.Client]:
    with client_for(server[0]) as c:
        yield c


def attacks(process: ServerProcess) -> list[str]:
    """Targets urlsplit reads as the server's own origin, and a browser does not."""
    own = f"127.0.0.1:{process.http_port}"
    return [
        f"http://127.0.0.1:1\\@{own}/cb",
        f"http://127.0.0.1:1%5c@{own}/cb",
        f"http://127.0.0.1:1%5C@{own}/cb",
        f"http:/\\127.0.0.1:1/@{own}/cb",
        f"http://127.0.0.1:1\t\\@{own}/cb",
    ]


def _goes_to_attacker(answer: httpx.Response) -> bool:
    """Where a browser goes with this answer's Location (WHATWG URL, as browsers read it)."""
    location = answer.headers.get("location")
    if location is None:
        return False
    return ada_url.URL(location, base=str(answer.request.url)).host == "127.0.0.1:1"


@pytest.mark.parametrize("response_type", ["code", "token"])
def test_authorize_sends_no_code_or_token_to_the_other_host(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client, response_type: str
) -> None:
    process, _ = server
    signed_up = signup(client, unique_email("authorize"))
    cookie = with_cookie(session_cookie(signed_up))
    for target in attacks(process):
        query = (
            f"client_id={CLIENT_ID}&response_type={response_type}&state=s1"
            f"&code_challenge={CHALLENGE.decode()}&code_challenge_method=S256"
            f"&redirect_uri={quote(target, safe='')}"
        )
        answer = client.get(f"/authorize?{query}", headers=cookie)
        assert answer.status_code == 400, (target, answer.status_code, answer.headers)
        assert not _goes_to_attacker(answer), target
    # the plain target on our own origin still gets its code
    plain = f"{process.url}/cb"
    query = (
        f"client_id={CLIENT_ID}&response_type=code&state=s1&code_challenge={CHALLENGE.decode()}"
        f"&code_challenge_method=S256&redirect_uri={quote(plain, safe='')}"
    )
    answer = client.get(f"/authorize?{query}", headers=cookie)
    assert answer.status_code == 302, answer.text
    assert answer.headers["location"].startswith(f"{plain}?")


def test_rest_refuses_the_target_in_signup_magic_link_and_forgot_password(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    process, _ = server
    for target in attacks(process):
        email = unique_email("rest")
        refused = [
            signup(client, email, redirect_uri=target),
            client.post("/v1/magic_link_login", json={"email": email, "redirect_uri": target}),
            client.post("/v1/forgot_password", json={"email": email, "redirect_uri": target}),
        ]
        for answer in refused:
            assert answer.status_code == 400, (target, answer.request.url, answer.text)
            assert answer.json() == {
                "code": "invalid_argument",
                "message": "invalid redirect URI",
            }


def _graphql_error(client: httpx.Client, mutation: tuple[str, str], params: dict[str, str]) -> str:
    """The error of ``mutation`` (its name and its input type) with ``params``."""
    name, input_type = mutation
    query = f"mutation($p: {input_type}!) {{ {name}(params: $p) {{ message }} }}"
    body = client.post("/graphql", json={"query": query, "variables": {"p": params}}).json()
    assert body.get("data") is None or body["data"].get(name) is None, body
    return str(body["errors"][0]["message"])


def test_graphql_refuses_the_target(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    process, _ = server
    for target in attacks(process):
        email = unique_email("graphql")
        password = "Str0ng!pass-graphql"
        for mutation, params in [
            (
                ("signup", "SignUpRequest"),
                {"email": email, "password": password, "confirm_password": password},
            ),
            (("magic_link_login", "MagicLinkLoginRequest"), {"email": email}),
            (("forgot_password", "ForgotPasswordRequest"), {"email": email}),
        ]:
            message = _graphql_error(client, mutation, {**params, "redirect_uri": target})
            assert message == "invalid redirect URI", (mutation, target)


def test_grpc_refuses_the_target(server: tuple[ServerProcess, SpooledMailSink]) -> None:
    process, _ = server
    with grpc.insecure_channel(f"127.0.0.1:{process.grpc_port}") as channel:
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
        for target in attacks(process):
            email = unique_email("grpc")
            password = "Str0ng!pass-grpc"
            calls = [
                (
                    stub.Signup,
                    authorizer_pb2.SignupRequest(
                        email=email,
                        password=password,
                        confirm_password=password,
                        redirect_uri=target,
                    ),
                ),
                (
                    stub.MagicLinkLogin,
                    authorizer_pb2.MagicLinkLoginRequest(email=email, redirect_uri=target),
                ),
                (
                    stub.ForgotPassword,
                    authorizer_pb2.ForgotPasswordRequest(email=email, redirect_uri=target),
                ),
            ]
            for call, request in calls:
                with pytest.raises(grpc.RpcError) as refused:
                    call(request, timeout=10)
                assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT, target
                assert refused.value.details() == "invalid redirect URI"


def test_the_mailed_link_lands_on_our_origin_whatever_its_redirect_says(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    """A genuine mailed magic link whose ``redirect_uri`` is swapped for the shape: the
    landing signs in but sends the browser (and its ``access_token``) home, not there."""
    process, sink = server
    for target in attacks(process):
        email = unique_email("landing")
        assert client.post("/v1/magic_link_login", json={"email": email}).status_code == 200
        link = urlsplit(link_in(mails_to(sink, email)[0]))
        token = parse_qs(link.query)["token"][0]
        landing = client.get(
            f"/verify_email?token={token}&redirect_uri={quote(target, safe='')}",
            follow_redirects=False,
        )
        assert landing.status_code == 307, landing.text
        assert not _goes_to_attacker(landing), landing.headers["location"]
        assert landing.headers["location"].startswith(process.url)


def test_the_signed_in_page_is_no_open_redirect(
    server: tuple[ServerProcess, SpooledMailSink], client: httpx.Client
) -> None:
    process, _ = server
    cookie = with_cookie(session_cookie(signup(client, unique_email("app"))))
    for target in attacks(process):
        page = client.get(f"/app?redirect_uri={quote(target, safe='')}", headers=cookie)
        assert not _goes_to_attacker(page), page.headers
        assert page.status_code == 400, page.status_code
        assert "127.0.0.1:1" not in page.text
