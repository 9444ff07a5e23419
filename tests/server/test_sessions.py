"""A user's sessions (issue 22): two devices list each other, one signs the other out, and
the other's tokens are refused at once by a second process on the same storage (PostgreSQL
+ Redis, and one SQLite file). The same through GraphQL and gRPC, and for the super-admin
(one session or all of a user's); each revocation audited and announced by webhook."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
)
from tests.server.harness import (
    ADMIN_SECRET,
    CLIENT_ID,
    ServerProcess,
    backend_storage,
    free_port,
    running,
    start_server,
)
from tests.server.test_auth_webhooks import _wait_for as wait_for
from tests.server.test_auth_webhooks import receiver  # noqa: F401  (a fixture)

PASSWORD = "Sessions!pass1"
ONE, TWO = "DeviceOne/1.0 (laptop)", "DeviceTwo/2.0 (phone)"
ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
NOBODY = "00000000-0000-0000-0000-000000000000"


@dataclass
class Pair:
    """Two processes sharing one database and memory store, and one public ``--url`` (the
    first's: tokens name it as their issuer)."""

    first: ServerProcess
    second: ServerProcess


@pytest.fixture(scope="module", params=["postgres", "sqlite"])
def pair(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pair]:
    tmp: Path = tmp_path_factory.mktemp(f"sessions-{request.param}")
    storage = backend_storage(str(request.param), tmp, "sessions")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    flags = [*storage.flags, f"--url={url}", "--trusted-proxies=127.0.0.0/8"]
    first = start_server(flags, tmp, name="first", http_port=port)
    try:
        second = start_server(flags, tmp, name="second")
        try:
            yield Pair(first, second)
        finally:
            second.terminate()
    finally:
        first.terminate()


def _client(server: ServerProcess, agent: str, forwarded: str) -> httpx.Client:
    headers = {"origin": server.url, "user-agent": agent, "x-forwarded-for": forwarded}
    return httpx.Client(base_url=server.url, headers=headers, timeout=30)


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _signed_up(server: ServerProcess, forwarded: str) -> tuple[str, dict[str, Any]]:
    """A new user, signed in on device one by signing up there."""
    email = f"sessions-{uuid.uuid4().hex[:12]}@example.com"
    body = {
        "email": email,
        "password": PASSWORD,
        "confirm_password": PASSWORD,
        "scope": ["offline_access"],
    }
    with _client(server, ONE, forwarded) as http:
        answer = http.post("/v1/signup", json=body)
    assert answer.status_code == 200, answer.text
    return email, answer.json()


def _login(server: ServerProcess, email: str, agent: str, forwarded: str) -> dict[str, Any]:
    with _client(server, agent, forwarded) as http:
        answer = http.post(
            "/v1/login", json={"email": email, "password": PASSWORD, "scope": ["offline_access"]}
        )
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_two_devices_list_each_other_and_one_signs_the_other_out(pair: Pair) -> None:
    email, laptop = _signed_up(pair.first, "203.0.113.7")
    phone = _login(pair.second, email, TWO, "203.0.113.9")

    with _client(pair.first, ONE, "203.0.113.7") as http:
        listed = http.get("/v1/sessions", headers=_bearer(laptop["access_token"]))
    assert listed.status_code == 200, listed.text
    sessions = listed.json()["sessions"]
    assert len(sessions) == 2
    assert {s["user_agent"] for s in sessions} == {ONE, TWO}
    mine = next(s for s in sessions if s["current"])
    other = next(s for s in sessions if not s["current"])
    assert (mine["user_agent"], mine["ip"]) == (ONE, "203.0.113.7")
    assert (other["user_agent"], other["ip"]) == (TWO, "203.0.113.9")
    for session in sessions:
        assert set(session) == {"id", "created_at", "last_used_at", "ip", "user_agent", "current"}
        assert session["created_at"] <= session["last_used_at"]

    # The phone sees the same two, with itself as the current one.
    with _client(pair.second, TWO, "203.0.113.9") as http:
        seen = http.get("/v1/sessions", headers=_bearer(phone["access_token"])).json()
    assert {s["id"]: s["current"] for s in seen["sessions"]} == {
        mine["id"]: False,
        other["id"]: True,
    }

    with _client(pair.first, ONE, "203.0.113.7") as http:
        revoked = http.post(
            "/v1/revoke_session", json={"id": other["id"]}, headers=_bearer(laptop["access_token"])
        )
    assert revoked.status_code == 200, revoked.text

    # Refused at once by the other process: the access token and the refresh token.
    with _client(pair.second, TWO, "203.0.113.9") as http:
        assert http.get("/v1/profile", headers=_bearer(phone["access_token"])).status_code == 401
        refreshed = http.post(
            "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": phone["refresh_token"],
                "client_id": CLIENT_ID,
            },
        )
        assert refreshed.status_code in (400, 401), refreshed.text
        # The laptop's session lives on, on both processes, and lists alone.
        assert http.get("/v1/profile", headers=_bearer(laptop["access_token"])).status_code == 200
        left = http.get("/v1/sessions", headers=_bearer(laptop["access_token"])).json()
    assert [s["id"] for s in left["sessions"]] == [mine["id"]]

    # Revoked already: as unknown as any other id.
    with _client(pair.first, ONE, "203.0.113.7") as http:
        again = http.post(
            "/v1/revoke_session", json={"id": other["id"]}, headers=_bearer(laptop["access_token"])
        )
    assert again.status_code == 404, again.text
    assert again.json() == {"code": "not_found", "message": "session not found"}


def test_another_users_session_is_not_found_and_lives_on(pair: Pair) -> None:
    alice = _signed_up(pair.first, "203.0.113.1")[1]
    bob = _signed_up(pair.first, "203.0.113.2")[1]
    with _client(pair.first, TWO, "203.0.113.2") as http:
        bobs = http.get("/v1/sessions", headers=_bearer(bob["access_token"])).json()["sessions"]
    with _client(pair.second, ONE, "203.0.113.1") as http:
        tried = http.post(
            "/v1/revoke_session", json={"id": bobs[0]["id"]}, headers=_bearer(alice["access_token"])
        )
        assert tried.status_code == 404, tried.text
        assert tried.json() == {"code": "not_found", "message": "session not found"}
        assert http.get("/v1/profile", headers=_bearer(bob["access_token"])).status_code == 200
        assert http.get("/v1/sessions").status_code == 401
        missing = http.post("/v1/revoke_session", json={}, headers=_bearer(alice["access_token"]))
        assert missing.status_code == 400, missing.text


def test_graphql_lists_and_revokes(pair: Pair) -> None:
    email, laptop = _signed_up(pair.first, "203.0.113.7")
    phone = _login(pair.first, email, TWO, "203.0.113.9")

    def graphql(server: ServerProcess, query: str, token: str) -> dict[str, Any]:
        with _client(server, ONE, "203.0.113.7") as http:
            answer = http.post("/graphql", json={"query": query}, headers=_bearer(token))
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    listed = graphql(
        pair.first,
        "{ sessions { id created_at last_used_at ip user_agent current } }",
        laptop["access_token"],
    )
    sessions = listed["data"]["sessions"]
    assert sorted((s["user_agent"], s["current"]) for s in sessions) == [
        (ONE, True),
        (TWO, False),
    ]
    other = next(s["id"] for s in sessions if not s["current"])
    revoke = 'mutation { revoke_session(id: "%s") { message } }'
    done = graphql(pair.first, revoke % other, laptop["access_token"])
    assert done["data"]["revoke_session"]["message"]
    refused = graphql(pair.second, "{ sessions { id } }", phone["access_token"])
    assert refused["errors"], refused
    unknown = graphql(pair.second, revoke % other, laptop["access_token"])
    assert unknown["errors"][0]["extensions"]["code"] == "not_found", unknown


def test_grpc_lists_and_revokes(pair: Pair) -> None:
    email, laptop = _signed_up(pair.first, "203.0.113.7")
    phone = _login(pair.first, email, TWO, "203.0.113.9")
    with (
        grpc.insecure_channel(f"127.0.0.1:{pair.first.grpc_port}") as first,
        grpc.insecure_channel(f"127.0.0.1:{pair.second.grpc_port}") as second,
    ):
        stub = authorizer_pb2_grpc.AuthorizerServiceStub(first)
        other_stub = authorizer_pb2_grpc.AuthorizerServiceStub(second)
        metadata = (("authorization", f"Bearer {laptop['access_token']}"),)
        listed = stub.Sessions(authorizer_pb2.SessionsRequest(), metadata=metadata)
        assert sorted((s.user_agent, s.current) for s in listed.sessions) == [
            (ONE, True),
            (TWO, False),
        ]
        assert all(s.id and s.created_at > 0 and s.last_used_at > 0 for s in listed.sessions)
        other = next(s.id for s in listed.sessions if not s.current)
        done = stub.RevokeSession(authorizer_pb2.RevokeSessionRequest(id=other), metadata=metadata)
        assert done.message
        phone_metadata = (("authorization", f"Bearer {phone['access_token']}"),)
        with pytest.raises(grpc.RpcError) as refused:
            other_stub.Sessions(authorizer_pb2.SessionsRequest(), metadata=phone_metadata)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as unknown:
            other_stub.RevokeSession(
                authorizer_pb2.RevokeSessionRequest(id=other), metadata=metadata
            )
        assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


def _user_id(server: ServerProcess, email: str) -> str:
    with server.client() as http:
        found = http.post("/v1/admin/user", json={"email": email}, headers=ADMIN)
    assert found.status_code == 200, found.text
    return str(found.json()["id"])


def _own_sid(server: ServerProcess, token: str) -> str:
    with server.client() as http:
        listed = http.get("/v1/sessions", headers=_bearer(token)).json()["sessions"]
    return str(next(s["id"] for s in listed if s["current"]))


def test_admin_lists_a_users_sessions_and_signs_one_then_all_out(pair: Pair) -> None:
    email, laptop = _signed_up(pair.first, "203.0.113.7")
    phone = _login(pair.second, email, TWO, "203.0.113.9")
    user_id = _user_id(pair.first, email)

    with pair.first.client() as http:
        assert http.post("/v1/admin/user_sessions", json={"user_id": user_id}).status_code == 401
        listed = http.post("/v1/admin/user_sessions", json={"user_id": user_id}, headers=ADMIN)
        assert listed.status_code == 200, listed.text
        sessions = listed.json()["sessions"]
        assert sorted((s["user_agent"], s["ip"], s["current"]) for s in sessions) == [
            (ONE, "203.0.113.7", False),
            (TWO, "203.0.113.9", False),
        ]
        unknown = http.post("/v1/admin/user_sessions", json={"user_id": NOBODY}, headers=ADMIN)
        assert unknown.status_code == 404, unknown.text
        assert http.post("/v1/admin/user_sessions", json={}, headers=ADMIN).status_code == 400

        phones = _own_sid(pair.second, phone["access_token"])
        row = {"user_id": user_id, "id": phones}
        assert http.post("/v1/admin/revoke_user_session", json=row).status_code == 401
        done = http.post("/v1/admin/revoke_user_session", json=row, headers=ADMIN)
        assert done.status_code == 200, done.text
        assert done.json() == {"message": "session revoked successfully"}

    # The phone is refused at once by the other process; the laptop lives on.
    with _client(pair.second, TWO, "203.0.113.9") as http:
        assert http.get("/v1/profile", headers=_bearer(phone["access_token"])).status_code == 401
        assert http.get("/v1/profile", headers=_bearer(laptop["access_token"])).status_code == 200
        again = http.post("/v1/admin/revoke_user_session", json=row, headers=ADMIN)
        assert again.status_code == 404, again.text
        # A session of another user is as unknown, under this user's id.
        other = _signed_up(pair.second, "203.0.113.3")[1]
        theirs = {"user_id": user_id, "id": _own_sid(pair.second, other["access_token"])}
        refused = http.post("/v1/admin/revoke_user_session", json=theirs, headers=ADMIN)
        assert refused.status_code == 404, refused.text
        assert http.get("/v1/profile", headers=_bearer(other["access_token"])).status_code == 200

        everything = http.post(
            "/v1/admin/revoke_all_user_sessions", json={"user_id": user_id}, headers=ADMIN
        )
        assert everything.status_code == 200, everything.text

    # Every session of the user ends everywhere, the refresh token too; the account stays
    # usable: a new login works at once, and is the only session listed.
    with _client(pair.first, ONE, "203.0.113.7") as http:
        assert http.get("/v1/profile", headers=_bearer(laptop["access_token"])).status_code == 401
        refreshed = http.post(
            "/oauth/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": laptop["refresh_token"],
                "client_id": CLIENT_ID,
            },
        )
        assert refreshed.status_code in (400, 401), refreshed.text
        left = http.post("/v1/admin/user_sessions", json={"user_id": user_id}, headers=ADMIN)
        assert left.json() == {"sessions": []}
    fresh = _login(pair.first, email, ONE, "203.0.113.7")
    with pair.second.client() as http:
        assert http.get("/v1/profile", headers=_bearer(fresh["access_token"])).status_code == 200
        now = http.post("/v1/admin/user_sessions", json={"user_id": user_id}, headers=ADMIN)
    assert [s["id"] for s in now.json()["sessions"]] == [
        _own_sid(pair.first, fresh["access_token"])
    ]
    with pair.first.client() as http:
        gone = http.post(
            "/v1/admin/revoke_all_user_sessions", json={"user_id": NOBODY}, headers=ADMIN
        )
    assert gone.status_code == 404, gone.text


def test_admin_sessions_on_graphql_and_grpc(pair: Pair) -> None:
    email, laptop = _signed_up(pair.first, "203.0.113.7")
    phone = _login(pair.first, email, TWO, "203.0.113.9")
    user_id = _user_id(pair.first, email)

    def graphql(server: ServerProcess, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        with server.client() as http:
            answer = http.post(
                "/graphql", json={"query": query, "variables": variables}, headers=ADMIN
            )
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    listing = (
        "query($p: UserSessionsRequest!) "
        "{ _user_sessions(params: $p) { id created_at last_used_at ip user_agent current } }"
    )
    listed = graphql(pair.first, listing, {"p": {"user_id": user_id}})["data"]["_user_sessions"]
    assert sorted((s["user_agent"], s["current"]) for s in listed) == [(ONE, False), (TWO, False)]
    phones = _own_sid(pair.first, phone["access_token"])
    revoke = (
        "mutation($p: RevokeUserSessionRequest!) { _revoke_user_session(params: $p) { message } }"
    )
    done = graphql(pair.second, revoke, {"p": {"user_id": user_id, "id": phones}})
    assert done["data"]["_revoke_user_session"]["message"] == "session revoked successfully"
    again = graphql(pair.first, revoke, {"p": {"user_id": user_id, "id": phones}})
    assert again["errors"][0]["extensions"]["code"] == "not_found", again

    with (
        grpc.insecure_channel(f"127.0.0.1:{pair.first.grpc_port}") as first,
        grpc.insecure_channel(f"127.0.0.1:{pair.second.grpc_port}") as second,
    ):
        admin = admin_pb2_grpc.AuthorizerAdminServiceStub(second)
        public = authorizer_pb2_grpc.AuthorizerServiceStub(first)
        secret = (("x-service-admin-secret", ADMIN_SECRET),)
        with pytest.raises(grpc.RpcError) as refused:
            admin.AdminUserSessions(admin_pb2.AdminUserSessionsRequest(user_id=user_id))
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        listed_rpc = admin.AdminUserSessions(
            admin_pb2.AdminUserSessionsRequest(user_id=user_id), metadata=secret
        )
        [left] = listed_rpc.sessions
        assert (left.user_agent, left.HasField("current"), left.current) == (ONE, True, False)
        public.Profile(
            authorizer_pb2.ProfileRequest(),
            metadata=(("authorization", f"Bearer {laptop['access_token']}"),),
        )
        done_rpc = admin.AdminRevokeAllUserSessions(
            admin_pb2.AdminRevokeAllUserSessionsRequest(user_id=user_id), metadata=secret
        )
        assert done_rpc.message == "user sessions revoked successfully"
        with pytest.raises(grpc.RpcError) as ended:
            public.Profile(
                authorizer_pb2.ProfileRequest(),
                metadata=(("authorization", f"Bearer {laptop['access_token']}"),),
            )
        assert ended.value.code() is grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as unknown:
            admin.AdminRevokeUserSession(
                admin_pb2.AdminRevokeUserSessionRequest(user_id=user_id, id=left.id),
                metadata=secret,
            )
        assert unknown.value.code() is grpc.StatusCode.NOT_FOUND


def test_revocations_are_audited_and_announced(
    tmp_path: Path,
    receiver: tuple[str, list[dict[str, Any]]],  # noqa: F811  (the fixture)
) -> None:
    endpoint, received = receiver
    storage = backend_storage("sqlite", tmp_path, "sessions-hooks")
    flags = [*storage.flags, "--webhook-allow-private-targets", "--trusted-proxies=127.0.0.0/8"]
    with running(flags, tmp_path, name="hooks") as server:
        with server.client() as http:
            for event in ("user.session_revoked", "user.sessions_revoked"):
                added = http.post(
                    "/v1/admin/add_webhook",
                    json={"event_name": event, "endpoint": endpoint, "enabled": True},
                    headers=ADMIN,
                )
                assert added.status_code == 200, added.text
        email, laptop = _signed_up(server, "203.0.113.7")
        phone = _login(server, email, TWO, "203.0.113.9")
        tablet = _login(server, email, TWO, "203.0.113.10")
        user_id = _user_id(server, email)
        phones = _own_sid(server, phone["access_token"])
        tablets = _own_sid(server, tablet["access_token"])
        with _client(server, ONE, "203.0.113.7") as http:
            mine = http.post(
                "/v1/revoke_session", json={"id": phones}, headers=_bearer(laptop["access_token"])
            )
            assert mine.status_code == 200, mine.text
            assert wait_for(received, "user.session_revoked")["user"]["email"] == email
            received.clear()
            by_admin = http.post(
                "/v1/admin/revoke_user_session",
                json={"user_id": user_id, "id": tablets},
                headers=ADMIN,
            )
            assert by_admin.status_code == 200, by_admin.text
            assert wait_for(received, "user.session_revoked")["user"]["id"] == user_id
            everything = http.post(
                "/v1/admin/revoke_all_user_sessions", json={"user_id": user_id}, headers=ADMIN
            )
            assert everything.status_code == 200, everything.text
            announced = wait_for(received, "user.sessions_revoked")
            assert (announced["user"]["email"], announced["auth_recipe"]) == (email, "")
            rows = http.post(
                "/v1/admin/audit_logs",
                json={"resource": f"user:{user_id}", "pagination": {"limit": 100}},
                headers=ADMIN,
            ).json()["audit_logs"]
    by_action = {row["action"]: row for row in rows}
    own = by_action["user.session_revoked"]
    assert (own["actor_id"], own["actor_type"], own["actor_email"]) == (user_id, "user", email)
    assert own["ip_address"] == "203.0.113.7"
    assert json.loads(own["metadata"])["session"] == phones
    admins = by_action["admin.session_revoked"]
    assert (admins["actor_id"], admins["actor_type"]) == ("admin", "admin")
    assert json.loads(admins["metadata"])["session"] == tablets
    assert by_action["admin.sessions_revoked"]["resource_id"] == user_id
