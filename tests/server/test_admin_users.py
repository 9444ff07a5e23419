"""User administration over real HTTP and gRPC on SQLite (SQL-backed memory store) and on
PostgreSQL + Redis: listing, lookup, updates with uniqueness, deletion, access revocation
that ends every session at once (and holds if the memory-store delete is lost),
invitations through a real SMTP server, and the webhook events these fire."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc
import httpx
import pytest
import redis
import sqlalchemy as sa

from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, admin_pb2_grpc
from tests.dbfixtures import fresh_postgres_url, fresh_redis_url
from tests.mailsink import SpooledMailSink
from tests.server.harness import (
    ADMIN_SECRET,
    ServerProcess,
    base_flags,
    free_port,
    running,
)
from tests.webhook_receiver import Receiver, receiver

ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
PASSWORD = "Str0ng!pass"


@dataclass
class Env:
    backend: str
    server: ServerProcess
    sink: SpooledMailSink
    hooks: Receiver
    #: the memory store: a Redis URL, or the SQLite file whose service_memory table it is
    memory: str


@pytest.fixture(scope="module", params=["sqlite", "postgres+redis"])
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    backend: str = request.param
    tmp = tmp_path_factory.mktemp(f"users-{backend}")
    if backend == "sqlite":
        memory = str(tmp / "bastion.db")
        storage = base_flags("sqlite", memory)
    else:
        memory = fresh_redis_url()
        storage = [*base_flags("postgres", fresh_postgres_url("admin_users")),
                   f"--memory-store-url={memory}"]  # fmt: skip
    flags = [
        *storage,
        "--smtp-host=127.0.0.1",
        "--smtp-sender-email=bastion@example.com",
        "--webhook-allow-private-targets",
        "--roles=user,editor",
        "--protected-roles=admin",
        "--allowed-origins=http://app.example.test",
    ]
    with (
        SpooledMailSink(free_port(), tmp / "mail") as sink,
        receiver() as hooks,
        running([*flags, f"--smtp-port={sink.port}"], tmp) as server,
    ):
        with server.client() as client:
            client.headers.update(ADMIN)
            for event in ("user.deleted", "user.access_revoked", "user.access_enabled"):
                body = {"event_name": event, "endpoint": hooks.url, "enabled": True}
                assert client.post("/v1/admin/add_webhook", json=body).status_code == 200
        yield Env(backend, server, sink, hooks, memory)


@pytest.fixture
def admin(env: Env) -> Iterator[httpx.Client]:
    with env.server.client() as client:
        client.headers.update(ADMIN)
        yield client


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.json()["code"] == code
    return str(response.json()["message"])


def _signup(env: Env, email: str, **extra: Any) -> tuple[str, str]:
    """A new user (signed up over the public API) and an access token of theirs."""
    with env.server.client() as client:
        body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD, **extra}
        answer = _ok(client.post("/v1/signup", json=body))
    return str(answer["user"]["id"]), str(answer["access_token"])


def _login(env: Env, email: str) -> str:
    with env.server.client() as client:
        answer = _ok(client.post("/v1/login", json={"email": email, "password": PASSWORD}))
    return str(answer["access_token"])


def _profile_status(env: Env, token: str) -> int:
    with env.server.client() as client:
        return client.get("/v1/profile", headers={"authorization": f"Bearer {token}"}).status_code


def _unique(name: str) -> str:
    return f"{name}-{time.monotonic_ns()}@example.test"


def _events(env: Env, event: str, user_id: str, timeout: float = 30) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = [
            r.json for r in env.hooks.received
            if r.json["event_name"] == event and r.json["user"]["id"] == user_id
        ]  # fmt: skip
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _mail_to(env: Env, address: str, timeout: float = 30) -> EmailMessage:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in env.sink.messages():
            if message["To"] == address:
                return message
        time.sleep(0.05)
    raise AssertionError(f"no mail to {address}")


def _login_works(env: Env, email: str, timeout: float = 10) -> bool:
    """Log in until the new token is accepted: the session marker has whole seconds, so a
    token issued in the second access was revoked in is refused."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _profile_status(env, _login(env, email)) == 200:
            return True
        time.sleep(0.2)
    return False


# ---------------------------------------------------------------- memory store snapshots


def _memory_snapshot(env: Env, user_id: str) -> list[tuple[Any, ...]]:
    """The user's memory-store entries, to put back later (a memory-store delete that was
    lost)."""
    prefix = f"auth:{user_id}:"
    if env.backend == "sqlite":
        engine = sa.create_engine(f"sqlite:///{env.memory}", connect_args={"timeout": 30})
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT key, value, expires_at FROM service_memory WHERE key LIKE :p"),
                {"p": prefix + "%"},
            ).all()
        engine.dispose()
        return [tuple(row) for row in rows]
    client = redis.Redis.from_url(env.memory)
    try:
        return [(key, client.dump(key), client.pttl(key)) for key in client.scan_iter(prefix + "*")]
    finally:
        client.close()


def _memory_restore(env: Env, entries: list[tuple[Any, ...]]) -> None:
    if env.backend == "sqlite":
        engine = sa.create_engine(f"sqlite:///{env.memory}", connect_args={"timeout": 30})
        with engine.begin() as conn:
            for key, value, expires_at in entries:
                conn.execute(
                    sa.text("INSERT OR REPLACE INTO service_memory VALUES (:k, :v, :e)"),
                    {"k": key, "v": value, "e": expires_at},
                )
        engine.dispose()
        return
    client = redis.Redis.from_url(env.memory)
    try:
        for key, dumped, ttl in entries:
            client.restore(key, max(ttl, 1000), dumped, replace=True)
    finally:
        client.close()


# ---------------------------------------------------------------- reading


def test_users_and_user(env: Env, admin: httpx.Client) -> None:
    user_id, _ = _signup(env, _unique("list"), given_name="Lin")
    listed = _ok(admin.post("/v1/admin/users", json={"pagination": {"limit": 100}}))
    assert user_id in {u["id"] for u in listed["users"]}
    assert listed["pagination"]["total"] == len(listed["users"])
    by_id = _ok(admin.post("/v1/admin/user", json={"id": user_id}))
    assert by_id["id"] == user_id  # the bare User, no wrapper
    assert by_id["given_name"] == "Lin"
    assert "password" not in by_id
    assert "password_hash" not in by_id
    by_email = _ok(admin.post("/v1/admin/user", json={"email": by_id["email"].upper()}))
    assert by_email == by_id
    assert _error(admin.post("/v1/admin/user", json={}), 400, "invalid_argument") == (
        "invalid params, user id or email is required"
    )
    _error(admin.post("/v1/admin/user", json={"id": "no-such-user"}), 404, "not_found")


def test_users_pagination_edges(env: Env, admin: httpx.Client) -> None:
    for n in range(3):
        _signup(env, _unique(f"page{n}"))
    total = _ok(admin.post("/v1/admin/users", json={}))["pagination"]["total"]
    assert total >= 3
    first = _ok(admin.post("/v1/admin/users", json={"pagination": {"limit": 2}}))
    assert first["pagination"] == {"page": 1, "limit": 2, "total": total, "offset": 0}
    last_page = (total + 1) // 2
    last = _ok(admin.post("/v1/admin/users", json={"pagination": {"limit": 2, "page": last_page}}))
    assert len(last["users"]) == total - 2 * (last_page - 1)
    beyond = _ok(
        admin.post("/v1/admin/users", json={"pagination": {"page": last_page + 1, "limit": 2}})
    )
    assert beyond["users"] == []
    for bad in ({"page": 0}, {"limit": 0}, {"page": -4}, {"limit": 101}):
        _error(admin.post("/v1/admin/users", json={"pagination": bad}), 400, "invalid_argument")
    requests = _ok(admin.post("/v1/admin/verification_requests", json={"pagination": {"limit": 1}}))
    assert requests["pagination"]["limit"] == 1
    assert len(requests["verification_requests"]) <= 1
    _error(admin.post("/v1/admin/verification_requests", json={"pagination": {"page": 0}}), 400,
           "invalid_argument")  # fmt: skip


# ---------------------------------------------------------------- updating


def test_update_user(env: Env, admin: httpx.Client) -> None:
    user_id, token = _signup(env, _unique("upd"))
    other_email = _unique("other")
    _signup(env, other_email, phone_number="+15550001111")
    updated = _ok(
        admin.post(
            "/v1/admin/update_user",
            json={"id": user_id, "given_name": "Grace", "app_data": {"team": "a"},
                  "phone_number_verified": False},
        )
    )  # fmt: skip
    assert updated["id"] == user_id
    assert updated["given_name"] == "Grace"
    assert updated["app_data"] == {"team": "a"}
    assert _profile_status(env, token) == 200  # a profile change keeps the sessions

    # Uniqueness, with the spec's messages, under the signup lock.
    taken = admin.post("/v1/admin/update_user", json={"id": user_id, "email": other_email})
    assert _error(taken, 400, "invalid_argument") == "user with given email already exists"
    taken = admin.post(
        "/v1/admin/update_user", json={"id": user_id, "phone_number": "+15550001111"}
    )
    assert _error(taken, 400, "invalid_argument") == "user with given phone number already exists"

    for body, message in [
        ({"given_name": "x"}, "user_id is missing"),
        ({"id": user_id}, "please enter at least one param to update"),
        ({"id": user_id, "roles": ["root"]}, "invalid list of roles"),
        ({"id": user_id, "email": "not-an-email"}, "invalid email address"),
        ({"id": user_id, "app_data": "x"}, "malformed app_data"),
    ]:
        assert (
            _error(admin.post("/v1/admin/update_user", json=body), 400, "invalid_argument")
            == message
        )
    _error(
        admin.post("/v1/admin/update_user", json={"id": "nobody", "nickname": "n"}),
        404,
        "not_found",
    )

    # A role change (protected roles allowed for the admin) ends the user's sessions.
    roles = _ok(
        admin.post("/v1/admin/update_user", json={"id": user_id, "roles": ["editor", "admin"]})
    )
    assert roles["roles"] == ["editor", "admin"]
    assert _profile_status(env, token) == 401

    new_email = _unique("moved")
    body = {"id": user_id, "email": new_email, "email_verified": True}
    moved = _ok(admin.post("/v1/admin/update_user", json=body))
    assert moved["email"] == new_email
    assert moved["email_verified"] is True
    unverified = _ok(
        admin.post("/v1/admin/update_user", json={"id": user_id, "email_verified": False})
    )
    assert unverified["email_verified"] is False

    # Without email verification a changed address stays usable: no mail could prove it.
    kept_id, _ = _signup(env, _unique("kept"))
    renamed = _unique("renamed")
    changed = _ok(admin.post("/v1/admin/update_user", json={"id": kept_id, "email": renamed}))
    assert changed["email_verified"] is True
    assert _login(env, renamed)


# ---------------------------------------------------------------- access


def test_revoke_access_ends_every_session_at_once(env: Env, admin: httpx.Client) -> None:
    email = _unique("revoke")
    user_id, first = _signup(env, email)
    second = _login(env, email)
    assert _profile_status(env, first) == 200
    assert _profile_status(env, second) == 200
    entries = _memory_snapshot(env, user_id)
    assert entries, "the sessions live in the memory store"

    answer = admin.post("/v1/admin/revoke_access", json={"user_id": user_id})
    assert _ok(answer) == {"message": "user access revoked successfully"}
    assert _profile_status(env, first) == 401
    assert _profile_status(env, second) == 401
    assert _memory_snapshot(env, user_id) == []
    # Even if the memory-store delete had been lost, the SQL side refuses the tokens.
    _memory_restore(env, entries)
    assert _profile_status(env, first) == 401
    with env.server.client() as client:
        refused = client.post("/v1/login", json={"email": email, "password": PASSWORD})
        assert refused.status_code in (400, 401, 403)
    [event] = _events(env, "user.access_revoked", user_id)
    assert event["user"]["revoked_timestamp"] > 0
    assert _ok(admin.post("/v1/admin/user", json={"id": user_id}))["revoked_timestamp"] > 0

    enabled = admin.post("/v1/admin/enable_access", json={"user_id": user_id})
    assert _ok(enabled) == {"message": "user access enabled successfully"}
    assert _events(env, "user.access_enabled", user_id)
    assert _ok(admin.post("/v1/admin/user", json={"id": user_id}))["revoked_timestamp"] is None
    assert _login_works(env, email)
    # Tokens from before the revocation stay dead.
    assert _profile_status(env, first) == 401

    for path in ("revoke_access", "enable_access"):
        assert _error(admin.post(f"/v1/admin/{path}", json={}), 400, "invalid_argument") == (
            "user ID is missing"
        )
        _error(admin.post(f"/v1/admin/{path}", json={"user_id": "nobody"}), 404, "not_found")


def test_delete_user(env: Env, admin: httpx.Client) -> None:
    email = _unique("delete")
    user_id, token = _signup(env, email)
    with env.server.client() as client:  # leaves a verification request behind
        _ok(client.post("/v1/forgot_password", json={"email": email}))
    # The reset link is made from the outbox, moments after the answer.
    deadline = time.monotonic() + 30
    while True:
        pending = _ok(
            admin.post("/v1/admin/verification_requests", json={"pagination": {"limit": 100}})
        )
        if email in {r["email"] for r in pending["verification_requests"]}:
            break
        assert time.monotonic() < deadline, "no reset link was made"
        time.sleep(0.1)

    answer = admin.post("/v1/admin/delete_user", json={"email": email})
    assert _ok(answer) == {"message": "user deleted successfully"}
    _error(admin.post("/v1/admin/user", json={"id": user_id}), 404, "not_found")
    assert _profile_status(env, token) == 401
    assert _memory_snapshot(env, user_id) == []
    pending = _ok(
        admin.post("/v1/admin/verification_requests", json={"pagination": {"limit": 100}})
    )
    assert email not in {r["email"] for r in pending["verification_requests"]}
    [event] = _events(env, "user.deleted", user_id)
    assert event["user"]["email"] == email
    audit = _ok(admin.post("/v1/admin/audit_logs", json={"action": "admin.user_deleted",
                                                          "resource_id": user_id}))  # fmt: skip
    assert audit["pagination"]["total"] == 1
    _error(admin.post("/v1/admin/delete_user", json={"email": email}), 404, "not_found")
    assert _error(admin.post("/v1/admin/delete_user", json={}), 400, "invalid_argument") == (
        "email is required"
    )


# ---------------------------------------------------------------- invitations


def test_invite_members(env: Env, admin: httpx.Client) -> None:
    existing = _unique("exists")
    _signup(env, existing)
    fresh = [_unique("inv1"), _unique("inv2")]
    answer = _ok(
        admin.post(
            "/v1/admin/invite_members",
            json={"emails": [fresh[0], "not-an-email", existing, fresh[1]],
                  "redirect_uri": "http://app.example.test/welcome"},
        )
    )  # fmt: skip
    assert answer["message"] == (
        f"2 user(s) invited successfully. Not invited: not-an-email (invalid email address), "
        f"{existing} (already exists)."
    )
    assert sorted(u["email"] for u in answer["Users"]) == sorted(fresh)
    for address in fresh:
        mail = _mail_to(env, address)
        assert mail["Subject"] == "Please accept the invitation"
        html = mail.get_body(preferencelist=("html",)).get_content()  # type: ignore[union-attr]
        link = next(part for part in html.split('"') if "/app/setup-password?" in part)
        query = parse_qs(urlsplit(link.replace("&amp;", "&")).query)
        assert query["redirect_uri"] == ["http://app.example.test/welcome"]
        # The link's token lets the new member set a password, then log in.
        with env.server.client() as client:
            reset = client.post(
                "/v1/reset_password",
                json={
                    "token": query["token"][0],
                    "password": PASSWORD,
                    "confirm_password": PASSWORD,
                },
            )
            assert reset.status_code == 200, reset.text
        assert _profile_status(env, _login(env, address)) == 200

    body = {"emails": ["x@example.test"], "redirect_uri": "https://evil.test/"}
    refused = admin.post("/v1/admin/invite_members", json=body)
    _error(refused, 400, "invalid_argument")
    none = admin.post("/v1/admin/invite_members", json={"emails": ["nope"]})
    assert _error(none, 400, "invalid_argument") == "no valid emails found"
    audit = _ok(admin.post("/v1/admin/audit_logs", json={"action": "admin.invite_sent"}))
    assert audit["pagination"]["total"] >= 2


def test_invite_needs_mail(tmp_path: Path) -> None:
    with (
        running(base_flags("sqlite", str(tmp_path / "b.db")), tmp_path) as srv,
        srv.client() as client,
    ):
        answer = client.post("/v1/admin/invite_members", json={"emails": ["a@example.test"]},
                             headers=ADMIN)  # fmt: skip
        assert _error(answer, 400, "failed_precondition") == "email sending is disabled"


def test_an_admin_email_change_mails_update_email_and_unverifies(tmp_path: Path) -> None:
    """With email verification on, the new address is unverified until its update_email
    link is used (reference §6.11); declaring it verified in the same request skips that."""
    flags = [
        *base_flags("sqlite", str(tmp_path / "b.db")),
        "--smtp-host=127.0.0.1",
        "--smtp-sender-email=bastion@example.com",
        "--enable-email-verification",
    ]
    with (
        SpooledMailSink(free_port(), tmp_path / "mail") as sink,
        running([*flags, f"--smtp-port={sink.port}"], tmp_path) as srv,
        srv.client() as client,
    ):
        body = {"email": _unique("before"), "password": PASSWORD, "confirm_password": PASSWORD}
        _ok(client.post("/v1/signup", json=body))
        found = _ok(client.post("/v1/admin/user", json={"email": body["email"]}, headers=ADMIN))
        user_id = found["id"]
        new_email = _unique("after")
        moved = _ok(
            client.post(
                "/v1/admin/update_user", json={"id": user_id, "email": new_email}, headers=ADMIN
            )
        )
        assert moved["email"] == new_email
        assert moved["email_verified"] is False
        deadline = time.monotonic() + 30
        mail = None
        while mail is None and time.monotonic() < deadline:
            mail = next((m for m in sink.messages() if m["To"] == new_email), None)
            time.sleep(0.05)
        assert mail is not None, "no update_email mail"
        text = mail.get_body(preferencelist=("plain",))
        assert text is not None
        link = next(w for w in text.get_content().split() if w.startswith("http"))
        token = parse_qs(urlsplit(link).query)["token"][0]
        pending = _ok(client.post("/v1/admin/verification_requests", json={}, headers=ADMIN))
        identifiers = {r["email"]: r["identifier"] for r in pending["verification_requests"]}
        assert identifiers[new_email] == "update_email"
        verified = _ok(client.post("/v1/verify_email", json={"token": token}))
        assert verified["user"]["email"] == new_email
        assert verified["user"]["email_verified"] is True

        third = _unique("declared")
        body = {"id": user_id, "email": third, "email_verified": True}
        declared = _ok(client.post("/v1/admin/update_user", json=body, headers=ADMIN))
        assert declared["email_verified"] is True


# ---------------------------------------------------------------- GraphQL and gRPC


def test_graphql_and_grpc(env: Env, admin: httpx.Client) -> None:
    email = _unique("surfaces")
    user_id, _ = _signup(env, email)

    def graphql(query: str, variables: dict[str, Any] | None = None) -> Any:
        return _ok(admin.post("/graphql", json={"query": query, "variables": variables or {}}))

    got = graphql(
        "query($e: String) { _user(params: {email: $e}) { id email roles } }", {"e": email}
    )
    assert got["data"]["_user"] == {"id": user_id, "email": email, "roles": ["user"]}
    updated = graphql(
        'mutation($id: ID!) { _update_user(params: {id: $id, nickname: "gql",'
        " app_data: {a: 1}}) { nickname app_data } }",
        {"id": user_id},
    )
    assert updated["data"]["_update_user"] == {"nickname": "gql", "app_data": {"a": 1}}
    revoke = "mutation($id: String!) { _revoke_access(param: {user_id: $id}) { message } }"
    revoked = graphql(revoke, {"id": user_id})
    assert revoked["data"]["_revoke_access"]["message"] == "user access revoked successfully"
    listed = graphql("{ _users(params: {pagination: {limit: 1}}) { pagination { limit total }"
                     " users { id } } }")  # fmt: skip
    assert listed["data"]["_users"]["pagination"]["limit"] == 1

    metadata = tuple(ADMIN.items())
    with grpc.insecure_channel(f"127.0.0.1:{env.server.grpc_port}") as channel:
        stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
        user = stub.User(admin_pb2.UserRequest(id=user_id), metadata=metadata).user
        assert user.email == email
        assert dict(user.app_data.value) == {"a": 1}
        assert user.revoked_timestamp > 0
        stub.EnableAccess(admin_pb2.EnableAccessRequest(user_id=user_id), metadata=metadata)
        request = admin_pb2.UpdateUserRequest(id=user_id, given_name="Rpc", roles=["editor"])
        request.app_data.value.update({"b": "2"})
        changed = stub.UpdateUser(request, metadata=metadata).user
        assert (changed.given_name, list(changed.roles)) == ("Rpc", ["editor"])
        assert dict(changed.app_data.value) == {"b": "2"}
        assert changed.revoked_timestamp == 0
        page = stub.Users(admin_pb2.UsersRequest(pagination={"limit": 100}), metadata=metadata)
        assert user_id in {u.id for u in page.users}
        stub.DeleteUser(admin_pb2.DeleteUserRequest(id=user_id), metadata=metadata)
        with pytest.raises(grpc.RpcError) as caught:
            stub.User(admin_pb2.UserRequest(id=user_id), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
