"""Every bound RPC of ``authorizer.v1`` over a real socket, answering exactly as REST does.

One server (SQLite, a mail sink so emailed flows complete) for the module. Each call is
made on both surfaces and the answers are compared as protobuf messages: the REST body,
put into Authorizer's shape (``wrap_in`` fields, ``AppData`` maps), is parsed strictly into
the RPC's response message, so a field REST returns that the proto lacks or names
differently fails the comparison instead of vanishing. Errors compare as (status code,
message). The admin service is called without credentials, with the admin header and with
the ``service-admin`` cookie that ``AdminLogin`` returns in metadata.
"""

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
from google.protobuf import json_format
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
    types_pb2,
)
from bastion.transports.grpc.services import _RPCS
from tests.dbfixtures import fresh_sqlite_url
from tests.mailsink import SpooledMailSink
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, free_port, running
from tests.server.test_auth_flows import mails_to, token_in

SERVING = health_pb2.HealthCheckResponse.SERVING

PASSWORD = "Str0ng!pass"
ADMIN_HEADER = {"x-service-admin-secret": ADMIN_SECRET}
ADMIN_METADATA = tuple(ADMIN_HEADER.items())
MODEL = """model
  schema 1.1

type user

type doc
  relations
    define viewer: [user]
    define editor: [user]
"""
PUBLIC = authorizer_pb2.DESCRIPTOR.services_by_name["AuthorizerService"]
ADMIN = admin_pb2.DESCRIPTOR.services_by_name["AuthorizerAdminService"]
Metadata = tuple[tuple[str, str], ...]
#: Fields Authorizer's messages carry as ``AppData {value: Struct}``; REST has plain maps.
APP_DATA_FIELDS = {"app_data", "headers", "claims"}


@pytest.fixture(scope="module")
def sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpooledMailSink]:
    with SpooledMailSink(free_port(), tmp_path_factory.mktemp("grpc-rpcs-mail")) as s:
        yield s


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, sink: SpooledMailSink
) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("grpc-rpcs")
    flags = [
        *base_flags("sqlite", fresh_sqlite_url(tmp)),
        "--app-cookie-secure=false",
        "--enable-magic-link-login",
        "--smtp-host=127.0.0.1",
        f"--smtp-port={sink.port}",
        "--smtp-sender-email=bastion@example.com",
        "--webhook-allow-private-targets",  # TestEndpoint calls this server's /healthz
    ]
    with running(flags, tmp) as srv:
        yield srv


@pytest.fixture(scope="module")
def both(server: ServerProcess) -> Iterator[Surfaces]:
    with (
        grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel,
        server.client() as client,
    ):
        yield Surfaces(channel, client)


# -- calling both surfaces ---------------------------------------------------------------------


def _service_of(rpc: str) -> tuple[Any, Any]:
    if rpc in PUBLIC.methods_by_name:
        return PUBLIC, authorizer_pb2_grpc.AuthorizerServiceStub
    return ADMIN, admin_pb2_grpc.AuthorizerAdminServiceStub


def _request(rpc: str, body: dict[str, Any]) -> Message:
    service, _ = _service_of(rpc)
    method = service.methods_by_name[rpc]
    module = authorizer_pb2 if service is PUBLIC else admin_pb2
    message: Message = getattr(module, method.input_type.name)()
    return json_format.ParseDict(_grpc_form(body), message)


def rest_error(response: httpx.Response) -> tuple[grpc.StatusCode, str]:
    assert response.status_code >= 400, response.text
    body = response.json()
    return grpc.StatusCode[body["code"].upper()], body["message"]


def _grpc_form(value: Any) -> Any:
    if isinstance(value, list):
        return [_grpc_form(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {
        k: {"value": v} if k in APP_DATA_FIELDS and isinstance(v, dict) else _grpc_form(v)
        for k, v in value.items()
    }


def as_message(rpc: str, response: httpx.Response, wrap_in: str | None = None) -> Message:
    """REST's answer as the RPC's response message; unknown fields fail."""
    assert response.status_code == 200, response.text
    body = response.json()
    if rpc == "InviteMembers":  # REST keeps GraphQL's ``Users``; the message says ``users``
        body = {"users" if k == "Users" else k: v for k, v in body.items()}
    if rpc == "AdminMeta":
        # REST's /v1/admin/meta is /v1/meta plus the admin fields (spec); AdminMeta has only those.
        assert set(types_pb2.Meta.DESCRIPTOR.fields_by_name) <= set(body)
        body = {k: v for k, v in body.items() if k not in types_pb2.Meta.DESCRIPTOR.fields_by_name}
    service, _ = _service_of(rpc)
    output = service.methods_by_name[rpc].output_type
    holder = {"types.proto": types_pb2, "admin.proto": admin_pb2}.get(
        output.file.name.rsplit("/", 1)[-1], authorizer_pb2
    )
    body = _grpc_form(body)
    message: Message = getattr(holder, output.name)()
    return json_format.ParseDict({wrap_in: body} if wrap_in else body, message)


def cleared(message: Message, *paths: str) -> Message:
    """A copy without the per-call fields (dotted paths; ``list[].field``: in each item)."""
    copy = type(message)()
    copy.CopyFrom(message)
    for path in paths:
        _clear(copy, path.split("."))
    return copy


def _clear(message: Any, parts: list[str]) -> None:
    head, rest_parts = parts[0], parts[1:]
    if head.endswith("[]"):
        for item in getattr(message, head[:-2]):
            _clear(item, rest_parts)
    elif rest_parts:
        if message.HasField(head):
            _clear(getattr(message, head), rest_parts)
    else:
        message.ClearField(head)


@dataclass(frozen=True)
class Surfaces:
    """The gRPC channel and the REST client of the one server, called alike."""

    channel: grpc.Channel
    client: httpx.Client

    def call(
        self, rpc: str, body: dict[str, Any] | None = None, metadata: Metadata = ()
    ) -> tuple[Any, grpc.Call]:
        _, stub_class = _service_of(rpc)
        method = getattr(stub_class(self.channel), rpc)
        reply, outcome = method.with_call(_request(rpc, body or {}), metadata=metadata, timeout=10)
        return reply, outcome

    def failure(
        self, rpc: str, body: dict[str, Any] | None = None, metadata: Metadata = ()
    ) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(grpc.RpcError) as raised:
            self.call(rpc, body, metadata)
        error: Any = raised.value
        return error.code(), error.details()

    def rest(self, path: str, body: dict[str, Any] | None = None, **headers: str) -> httpx.Response:
        self.client.cookies.clear()  # credentials come only from ``headers``, as on gRPC
        if body is None:
            return self.client.get(path, headers=headers)
        return self.client.post(path, json=body, headers=headers)

    def same(
        self,
        rpc: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        get: bool = False,
        headers: dict[str, str] | None = None,
        wrap_in: str | None = None,
    ) -> Any:
        """One call on both surfaces with the same credentials; the answers must be equal."""
        headers = headers or {}
        reply, _ = self.call(rpc, body, tuple(headers.items()))
        answer = self.rest(path, None if get else (body or {}), **headers)
        assert reply == as_message(rpc, answer, wrap_in), (reply, answer.text)
        return reply

    def same_error(
        self,
        rpc: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        get: bool = False,
        headers: dict[str, str] | None = None,
    ) -> tuple[grpc.StatusCode, str]:
        headers = headers or {}
        got = self.failure(rpc, body, tuple(headers.items()))
        assert got == rest_error(self.rest(path, None if get else (body or {}), **headers))
        return got


def unique_email(tag: str = "rpc") -> str:
    return f"{tag}-{uuid.uuid4().hex[:12]}@example.com"


def signed_up(both: Surfaces) -> tuple[str, dict[str, Any]]:
    email = unique_email()
    answer = both.rest("/v1/signup", credentials(email))
    assert answer.status_code == 200, answer.text
    return email, answer.json()


def credentials(email: str) -> dict[str, str]:
    return {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def set_cookies(outcome: grpc.Call) -> dict[str, str]:
    found = {}
    for key, value in outcome.initial_metadata():
        if key == "set-cookie":
            name, _, rest_of = value.partition("=")
            found[name] = rest_of.split(";", 1)[0]
    return found


AUTH_VOLATILE = (
    "access_token",
    "id_token",
    "refresh_token",
    "user.id",
    "user.email",
    "user.created_at",
    "user.updated_at",
    "user.preferred_username",
)


# -- the binding table -------------------------------------------------------------------------


def test_every_rpc_is_bound() -> None:
    assert set(_RPCS["AuthorizerService"]) == set(PUBLIC.methods_by_name)
    assert set(_RPCS["AuthorizerAdminService"]) == set(ADMIN.methods_by_name)


@pytest.mark.parametrize("rpc", ["ResendOtp", "VerifyOtp"])
def test_otp_rpcs_without_an_mfa_cookie_are_unauthenticated(both: Surfaces, rpc: str) -> None:
    request = {"email": "a@b.test", **({"otp": "123456"} if rpc == "VerifyOtp" else {})}
    assert both.failure(rpc, request) == (grpc.StatusCode.UNAUTHENTICATED, "invalid session")


# -- the admin service: credentials ------------------------------------------------------------


@pytest.mark.parametrize("rpc", sorted(set(ADMIN.methods_by_name) - {"AdminLogin"}))
def test_admin_rpcs_refuse_callers_without_credentials(both: Surfaces, rpc: str) -> None:
    assert both.failure(rpc) == (grpc.StatusCode.UNAUTHENTICATED, "unauthorized")
    wrong = (("x-service-admin-secret", "not-the-secret"),)
    assert both.failure(rpc, metadata=wrong) == (grpc.StatusCode.UNAUTHENTICATED, "unauthorized")


def test_admin_login_session_and_logout_by_cookie(both: Surfaces) -> None:
    assert both.same_error("AdminLogin", "/v1/admin/login", {"admin_secret": "nope"}) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "invalid admin secret",
    )
    both.same_error("AdminLogin", "/v1/admin/login", {})
    reply, outcome = both.call("AdminLogin", {"admin_secret": ADMIN_SECRET})
    answer = both.rest("/v1/admin/login", {"admin_secret": ADMIN_SECRET})
    assert reply == as_message("AdminLogin", answer)
    first = (("cookie", f"service-admin={set_cookies(outcome)['service-admin']}"),)

    # AdminSession rotates the cookie on both surfaces; the old one is dead at once.
    rotated, outcome = both.call("AdminSession", metadata=first)
    second = {"cookie": f"service-admin={set_cookies(outcome)['service-admin']}"}
    answer = both.rest("/v1/admin/session", **second)
    assert rotated == as_message("AdminSession", answer)
    third = {"cookie": f"service-admin={answer.cookies['service-admin']}"}
    assert both.failure("AdminSession", metadata=first) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "unauthorized",
    )
    both.same("AdminMeta", "/v1/admin/meta", get=True, headers=third, wrap_in="admin_meta")
    both.same("Users", "/v1/admin/users", {"pagination": {"limit": 5}}, headers=third)
    logout, _ = both.call("AdminLogout", metadata=tuple(third.items()))
    assert logout == as_message("AdminLogout", both.rest("/v1/admin/logout", {}, **ADMIN_HEADER))
    both.same_error("AdminMeta", "/v1/admin/meta", get=True, headers=third)


# -- the public service ------------------------------------------------------------------------


def test_meta(both: Surfaces) -> None:
    meta = both.same("Meta", "/v1/meta", get=True)
    assert meta.client_id == "test-client"


def test_signup_login_profile_and_their_errors(both: Surfaces) -> None:
    email = unique_email()
    reply, outcome = both.call("Signup", credentials(email))
    assert reply.user.email == email
    assert "cookie_session" in set_cookies(outcome)
    other = both.rest("/v1/signup", credentials(unique_email()))
    assert cleared(reply, *AUTH_VOLATILE) == cleared(as_message("Signup", other), *AUTH_VOLATILE)
    both.same_error("Signup", "/v1/signup", credentials(email))
    mismatch = {**credentials(unique_email()), "confirm_password": "other"}
    both.same_error("Signup", "/v1/signup", mismatch)

    login, outcome = both.call("Login", {"email": email, "password": PASSWORD})
    assert "cookie_session" in set_cookies(outcome)
    again = both.rest("/v1/login", {"email": email, "password": PASSWORD})
    tokens = ("access_token", "id_token", "refresh_token")
    assert cleared(login, *tokens) == cleared(as_message("Login", again), *tokens)
    both.same_error("Login", "/v1/login", {"email": email, "password": "Wr0ng!pass"})

    headers = bearer(login.access_token)
    profile = both.same("Profile", "/v1/profile", get=True, headers=headers)
    assert profile.id == login.user.id
    both.same_error("Profile", "/v1/profile", get=True)


def test_session_validate_logout_and_revoke(both: Surfaces) -> None:
    email, _ = signed_up(both)
    login, outcome = both.call(
        "Login", {"email": email, "password": PASSWORD, "scope": ["offline_access"]}
    )
    session = set_cookies(outcome)["cookie_session"]
    cookie = {"cookie": f"cookie_session={session}"}

    check = {"cookie": session}
    both.same("ValidateSession", "/v1/validate_session", check)
    both.same_error("ValidateSession", "/v1/validate_session", {"cookie": "bogus"})
    token = {"token_type": "access_token", "token": login.access_token}
    both.same("ValidateJwtToken", "/v1/validate_jwt_token", token)
    both.same_error(
        "ValidateJwtToken", "/v1/validate_jwt_token", {**token, "token_type": "no_such_type"}
    )

    rotated, outcome = both.call("Session", metadata=tuple(cookie.items()))
    assert rotated.user.id == login.user.id
    assert rotated.access_token
    cookie = {"cookie": f"cookie_session={set_cookies(outcome)['cookie_session']}"}
    by_rest = both.rest("/v1/session", {}, **cookie)
    assert cleared(rotated, *AUTH_VOLATILE[:3]) == cleared(
        as_message("Session", by_rest), *AUTH_VOLATILE[:3]
    )
    both.same_error("Session", "/v1/session", {})

    offline = {"email": email, "password": PASSWORD, "scope": ["offline_access"]}
    mine, _ = both.call("Login", offline)
    revoked, _ = both.call("Revoke", {"refresh_token": mine.refresh_token})
    both.same_error("Revoke", "/v1/revoke", {"refresh_token": mine.refresh_token})
    other = both.rest(
        "/v1/login", {"email": email, "password": PASSWORD, "scope": ["offline_access"]}
    ).json()
    assert revoked == as_message(
        "Revoke", both.rest("/v1/revoke", {"refresh_token": other["refresh_token"]})
    )

    fresh = both.rest("/v1/login", {"email": email, "password": PASSWORD}).json()
    ending, _ = both.call("Login", {"email": email, "password": PASSWORD})
    logout, _ = both.call("Logout", metadata=tuple(bearer(ending.access_token).items()))
    assert logout == as_message(
        "Logout", both.rest("/v1/logout", {}, **bearer(fresh["access_token"]))
    )
    both.same_error("Logout", "/v1/logout", {})


def test_update_profile_and_deactivate(both: Surfaces) -> None:
    _, first = signed_up(both)
    _, second = signed_up(both)
    change = {"given_name": "Ada", "app_data": {"team": "blue"}}
    by_grpc, _ = both.call("UpdateProfile", change, tuple(bearer(first["access_token"]).items()))
    by_rest = both.rest("/v1/update_profile", change, **bearer(second["access_token"]))
    assert by_grpc == as_message("UpdateProfile", by_rest)
    profile = both.same("Profile", "/v1/profile", get=True, headers=bearer(first["access_token"]))
    assert profile.given_name == "Ada"
    assert json_format.MessageToDict(profile.app_data.value) == {"team": "blue"}
    both.same_error(
        "UpdateProfile",
        "/v1/update_profile",
        {"new_password": "N3w!password", "confirm_new_password": "other"},
        headers=bearer(first["access_token"]),
    )

    gone, _ = both.call("DeactivateAccount", metadata=tuple(bearer(first["access_token"]).items()))
    assert gone == as_message(
        "DeactivateAccount",
        both.rest("/v1/deactivate_account", {}, **bearer(second["access_token"])),
    )
    both.same_error("DeactivateAccount", "/v1/deactivate_account", {})


def test_emailed_flows(both: Surfaces, sink: SpooledMailSink) -> None:
    email, _ = signed_up(both)
    other, _ = signed_up(both)
    both.same("MagicLinkLogin", "/v1/magic_link_login", {"email": email})
    both.same_error("MagicLinkLogin", "/v1/magic_link_login", {"email": ""})
    both.same_error("VerifyEmail", "/v1/verify_email", {"token": "not-a-token"})
    resend = {"email": email, "identifier": "basic_auth_signup"}
    both.same("ResendVerifyEmail", "/v1/resend_verify_email", resend)
    both.same_error("ResendVerifyEmail", "/v1/resend_verify_email", {"email": ""})

    # Fresh users: the only mail each receives is its reset link.
    forgetful, _ = signed_up(both)
    reply, _ = both.call("ForgotPassword", {"email": forgetful})
    assert reply == as_message("ForgotPassword", both.rest("/v1/forgot_password", {"email": other}))
    both.same_error("ForgotPassword", "/v1/forgot_password", {"email": ""})
    (mail,) = mails_to(sink, forgetful)
    reset = {
        "token": token_in(mail),
        "password": "N3w!password",
        "confirm_password": "N3w!password",
    }
    done, _ = both.call("ResetPassword", reset)
    (other_mail,) = mails_to(sink, other)
    assert done == as_message(
        "ResetPassword", both.rest("/v1/reset_password", {**reset, "token": token_in(other_mail)})
    )
    both.same_error("ResetPassword", "/v1/reset_password", reset)
    login, _ = both.call("Login", {"email": forgetful, "password": "N3w!password"})
    assert login.user.email == forgetful


# -- authorization -----------------------------------------------------------------------------


def test_fga_rpcs(both: Surfaces) -> None:
    written, _ = both.call("FgaWriteModel", {"dsl": MODEL}, ADMIN_METADATA)
    got = both.same(
        "FgaGetModel", "/v1/admin/fga/model", get=True, headers=ADMIN_HEADER, wrap_in="model"
    )
    assert got.model == written.model
    assert cleared(written, "model.id") == cleared(
        as_message(
            "FgaWriteModel",
            both.rest("/v1/admin/fga/model", {"dsl": MODEL}, **ADMIN_HEADER),
            "model",
        ),
        "model.id",
    )
    both.same_error(
        "FgaWriteModel", "/v1/admin/fga/model", {"dsl": "not a model"}, headers=ADMIN_HEADER
    )

    who = f"user:{uuid.uuid4().hex[:10]}"
    doc = f"doc:{uuid.uuid4().hex[:10]}"
    tuples = {"tuples": [{"user": who, "relation": "viewer", "object": doc}]}
    editor = {"tuples": [{"user": who, "relation": "editor", "object": doc}]}
    wrote, _ = both.call("FgaWriteTuples", tuples, ADMIN_METADATA)
    assert wrote == as_message(
        "FgaWriteTuples", both.rest("/v1/admin/fga/tuples", editor, **ADMIN_HEADER)
    )
    both.same_error(
        "FgaWriteTuples",
        "/v1/admin/fga/tuples",
        {"tuples": [{"user": who, "relation": "viewer", "object": "no-type"}]},
        headers=ADMIN_HEADER,
    )
    read = both.same(
        "FgaReadTuples", "/v1/admin/fga/tuples/read", {"object": doc}, headers=ADMIN_HEADER
    )
    assert len(read.tuples) == 2
    both.same_error(
        "FgaReadTuples",
        "/v1/admin/fga/tuples/read",
        {"continuation_token": "not-a-token"},
        headers=ADMIN_HEADER,
    )
    both.same(
        "FgaListUsers",
        "/v1/admin/fga/list_users",
        {"object": doc, "relation": "viewer", "user_type": "user"},
        headers=ADMIN_HEADER,
    )
    both.same_error(
        "FgaListUsers", "/v1/admin/fga/list_users", {"object": doc}, headers=ADMIN_HEADER
    )
    tree = both.same(
        "FgaExpand",
        "/v1/admin/fga/expand",
        {"object": doc, "relation": "viewer"},
        headers=ADMIN_HEADER,
    )
    assert json.loads(tree.tree)["root"]["name"] == f"{doc}#viewer"
    both.same_error("FgaExpand", "/v1/admin/fga/expand", {"object": doc}, headers=ADMIN_HEADER)

    checks = {
        "user": who,
        "checks": [
            {"relation": "viewer", "object": doc},
            {"relation": "viewer", "object": "doc:other"},
        ],
    }
    result = both.same("CheckPermissions", "/v1/check_permissions", checks, headers=ADMIN_HEADER)
    assert [r.allowed for r in result.results] == [True, False]
    both.same_error(
        "CheckPermissions", "/v1/check_permissions", {"user": who}, headers=ADMIN_HEADER
    )
    listed = both.same(
        "ListPermissions",
        "/v1/list_permissions",
        {"user": who, "object_type": "doc", "relation": "viewer"},
        headers=ADMIN_HEADER,
    )
    assert list(listed.objects) == [doc]
    assert both.same_error("ListPermissions", "/v1/list_permissions", {"relation": "viewer"}) == (
        grpc.StatusCode.UNAUTHENTICATED,
        "unauthorized",
    )

    # Reset refuses while tuples exist, on both surfaces alike.
    both.same_error("FgaReset", "/v1/admin/fga/reset", {}, headers=ADMIN_HEADER)
    deleted, _ = both.call("FgaDeleteTuples", tuples, ADMIN_METADATA)
    assert deleted == as_message(
        "FgaDeleteTuples", both.rest("/v1/admin/fga/tuples/delete", editor, **ADMIN_HEADER)
    )
    both.same_error(
        "FgaDeleteTuples",
        "/v1/admin/fga/tuples/delete",
        {"tuples": tuples["tuples"] * 2},
        headers=ADMIN_HEADER,
    )
    # Once the tuples are gone, reset empties the store (model included) on either surface.
    reset, _ = both.call("FgaReset", {}, ADMIN_METADATA)
    assert reset == as_message("FgaReset", both.rest("/v1/admin/fga/reset", {}, **ADMIN_HEADER))


# -- administration ----------------------------------------------------------------------------


def test_admin_user_rpcs(both: Surfaces) -> None:
    email, signup = signed_up(both)
    user_id = signup["user"]["id"]
    by_id = {"id": user_id}
    both.same("User", "/v1/admin/user", by_id, headers=ADMIN_HEADER, wrap_in="user")
    both.same("User", "/v1/admin/user", {"email": email}, headers=ADMIN_HEADER, wrap_in="user")
    both.same_error("User", "/v1/admin/user", {"id": str(uuid.uuid4())}, headers=ADMIN_HEADER)
    both.same(
        "Users", "/v1/admin/users", {"pagination": {"limit": 3, "page": 1}}, headers=ADMIN_HEADER
    )
    both.same_error("Users", "/v1/admin/users", {"pagination": {"limit": -1}}, headers=ADMIN_HEADER)

    change = {"id": user_id, "given_name": "Grace", "app_data": {"tier": "gold"}}
    updated, _ = both.call("UpdateUser", change, ADMIN_METADATA)
    assert updated.user.given_name == "Grace"
    assert json_format.MessageToDict(updated.user.app_data.value) == {"tier": "gold"}
    again = both.rest("/v1/admin/update_user", change, **ADMIN_HEADER)
    assert cleared(updated, "user.updated_at") == cleared(
        as_message("UpdateUser", again, "user"), "user.updated_at"
    )
    both.same_error(
        "UpdateUser", "/v1/admin/update_user", {"given_name": "x"}, headers=ADMIN_HEADER
    )

    _, second = signed_up(both)
    revoke = {"user_id": user_id}
    revoked, _ = both.call("RevokeAccess", revoke, ADMIN_METADATA)
    assert revoked == as_message(
        "RevokeAccess",
        both.rest("/v1/admin/revoke_access", {"user_id": second["user"]["id"]}, **ADMIN_HEADER),
    )
    both.same_error("RevokeAccess", "/v1/admin/revoke_access", {}, headers=ADMIN_HEADER)
    enabled, _ = both.call("EnableAccess", revoke, ADMIN_METADATA)
    assert enabled == as_message(
        "EnableAccess",
        both.rest("/v1/admin/enable_access", {"user_id": second["user"]["id"]}, **ADMIN_HEADER),
    )
    both.same_error("EnableAccess", "/v1/admin/enable_access", {}, headers=ADMIN_HEADER)

    invited, _ = both.call("InviteMembers", {"emails": [unique_email("invite")]}, ADMIN_METADATA)
    by_rest = both.rest(
        "/v1/admin/invite_members", {"emails": [unique_email("invite")]}, **ADMIN_HEADER
    )
    volatile = (
        "users[].id",
        "users[].email",
        "users[].preferred_username",
        "users[].created_at",
        "users[].updated_at",
    )
    assert len(invited.users) == 1
    assert cleared(invited, *volatile) == cleared(as_message("InviteMembers", by_rest), *volatile)
    both.same_error(
        "InviteMembers",
        "/v1/admin/invite_members",
        {"emails": ["not-an-email"]},
        headers=ADMIN_HEADER,
    )
    both.same(
        "VerificationRequests",
        "/v1/admin/verification_requests",
        {"pagination": {"limit": 50}},
        headers=ADMIN_HEADER,
    )
    both.same_error(
        "VerificationRequests",
        "/v1/admin/verification_requests",
        {"pagination": {"limit": -1}},
        headers=ADMIN_HEADER,
    )

    deleted, _ = both.call("DeleteUser", {"email": email}, ADMIN_METADATA)
    assert deleted == as_message(
        "DeleteUser",
        both.rest("/v1/admin/delete_user", {"email": second["user"]["email"]}, **ADMIN_HEADER),
    )
    both.same_error("DeleteUser", "/v1/admin/delete_user", {"email": email}, headers=ADMIN_HEADER)


def test_admin_webhook_rpcs(both: Surfaces, server: ServerProcess) -> None:
    hook = {
        "event_name": "user.login",
        "endpoint": "https://hooks.example.com/a",
        "enabled": True,
        "headers": {"x-team": "blue"},
    }
    added, _ = both.call("AddWebhook", hook, ADMIN_METADATA)
    assert added == as_message(
        "AddWebhook",
        both.rest("/v1/admin/add_webhook", {**hook, "event_name": "user.signup"}, **ADMIN_HEADER),
    )
    both.same_error(
        "AddWebhook",
        "/v1/admin/add_webhook",
        {**hook, "event_name": "no.such_event"},
        headers=ADMIN_HEADER,
    )
    listing = both.same(
        "Webhooks", "/v1/admin/webhooks", {"pagination": {"limit": 10}}, headers=ADMIN_HEADER
    )
    ids = {w.event_name: w.id for w in listing.webhooks}
    assert json_format.MessageToDict(listing.webhooks[0].headers.value) == {"x-team": "blue"}
    both.same_error(
        "Webhooks", "/v1/admin/webhooks", {"pagination": {"limit": -1}}, headers=ADMIN_HEADER
    )
    one = both.same(
        "GetWebhook",
        "/v1/admin/webhook",
        {"id": ids["user.login"]},
        headers=ADMIN_HEADER,
        wrap_in="webhook",
    )
    assert one.webhook.endpoint == hook["endpoint"]
    both.same_error(
        "GetWebhook", "/v1/admin/webhook", {"id": str(uuid.uuid4())}, headers=ADMIN_HEADER
    )

    change = {"endpoint": "https://hooks.example.com/b", "headers": {"x-team": "red"}}
    updated, _ = both.call("UpdateWebhook", {"id": ids["user.login"], **change}, ADMIN_METADATA)
    assert updated == as_message(
        "UpdateWebhook",
        both.rest("/v1/admin/update_webhook", {"id": ids["user.signup"], **change}, **ADMIN_HEADER),
    )
    after = both.same(
        "GetWebhook",
        "/v1/admin/webhook",
        {"id": ids["user.login"]},
        headers=ADMIN_HEADER,
        wrap_in="webhook",
    )
    assert json_format.MessageToDict(after.webhook.headers.value) == {"x-team": "red"}
    both.same_error(
        "UpdateWebhook",
        "/v1/admin/update_webhook",
        {"id": str(uuid.uuid4()), "enabled": False},
        headers=ADMIN_HEADER,
    )

    both.same(
        "WebhookLogs",
        "/v1/admin/webhook_logs",
        {"webhook_id": ids["user.login"]},
        headers=ADMIN_HEADER,
    )
    both.same_error(
        "WebhookLogs", "/v1/admin/webhook_logs", {"pagination": {"limit": -1}}, headers=ADMIN_HEADER
    )
    probe = {"event_name": "user.login", "endpoint": f"{server.url}/healthz"}
    tested, _ = both.call("TestEndpoint", probe, ADMIN_METADATA)
    assert cleared(tested, "response") == cleared(
        as_message("TestEndpoint", both.rest("/v1/admin/test_endpoint", probe, **ADMIN_HEADER)),
        "response",
    )
    both.same_error(
        "TestEndpoint",
        "/v1/admin/test_endpoint",
        {"event_name": "user.login"},
        headers=ADMIN_HEADER,
    )

    deleted, _ = both.call("DeleteWebhook", {"id": ids["user.login"]}, ADMIN_METADATA)
    assert deleted == as_message(
        "DeleteWebhook",
        both.rest("/v1/admin/delete_webhook", {"id": ids["user.signup"]}, **ADMIN_HEADER),
    )
    both.same_error(
        "DeleteWebhook", "/v1/admin/delete_webhook", {"id": ids["user.login"]}, headers=ADMIN_HEADER
    )


def test_admin_email_template_rpcs(both: Surfaces) -> None:
    template = {
        "event_name": "magic_link_login",
        "subject": "Sign in",
        "template": "<p>{{.verification_url}}</p>",
    }
    added, _ = both.call("AddEmailTemplate", template, ADMIN_METADATA)
    assert added == as_message(
        "AddEmailTemplate",
        both.rest(
            "/v1/admin/add_email_template",
            {**template, "event_name": "forgot_password"},
            **ADMIN_HEADER,
        ),
    )
    both.same_error(
        "AddEmailTemplate",
        "/v1/admin/add_email_template",
        {**template, "event_name": "nope"},
        headers=ADMIN_HEADER,
    )
    listing = both.same(
        "EmailTemplates",
        "/v1/admin/email_templates",
        {"pagination": {"limit": 10}},
        headers=ADMIN_HEADER,
    )
    ids = {t.event_name: t.id for t in listing.email_templates}
    both.same_error(
        "EmailTemplates",
        "/v1/admin/email_templates",
        {"pagination": {"limit": -1}},
        headers=ADMIN_HEADER,
    )
    updated, _ = both.call(
        "UpdateEmailTemplate", {"id": ids["magic_link_login"], "subject": "Log in"}, ADMIN_METADATA
    )
    assert updated == as_message(
        "UpdateEmailTemplate",
        both.rest(
            "/v1/admin/update_email_template",
            {"id": ids["forgot_password"], "subject": "Reset"},
            **ADMIN_HEADER,
        ),
    )
    both.same_error(
        "UpdateEmailTemplate",
        "/v1/admin/update_email_template",
        {"id": str(uuid.uuid4()), "subject": "x"},
        headers=ADMIN_HEADER,
    )
    deleted, _ = both.call("DeleteEmailTemplate", {"id": ids["magic_link_login"]}, ADMIN_METADATA)
    assert deleted == as_message(
        "DeleteEmailTemplate",
        both.rest(
            "/v1/admin/delete_email_template", {"id": ids["forgot_password"]}, **ADMIN_HEADER
        ),
    )
    both.same_error(
        "DeleteEmailTemplate",
        "/v1/admin/delete_email_template",
        {"id": ids["magic_link_login"]},
        headers=ADMIN_HEADER,
    )


def test_audit_rows_of_grpc_calls_carry_the_peer_address(both: Surfaces) -> None:
    email, signup = signed_up(both)
    user_id = signup["user"]["id"]
    # No trusted proxies are configured: a forwarded-for header from the peer is not believed.
    spoofed = (*ADMIN_METADATA, ("x-forwarded-for", "203.0.113.9"))
    both.call("UpdateUser", {"id": user_id, "nickname": "audited"}, spoofed)
    both.call("User", {"email": email}, ADMIN_METADATA)
    query = {"action": "admin.user_updated", "resource_id": user_id}
    logs = both.same("AuditLogs", "/v1/admin/audit_logs", query, headers=ADMIN_HEADER)
    (row,) = logs.audit_logs
    assert (row.action, row.resource_type, row.resource_id) == (
        "admin.user_updated",
        "user",
        user_id,
    )
    assert row.ip_address == "127.0.0.1"
    assert json.loads(row.metadata)["protocol"] == "grpc"
    both.same_error(
        "AuditLogs", "/v1/admin/audit_logs", {"pagination": {"limit": -1}}, headers=ADMIN_HEADER
    )


def test_undecodable_request_bytes_are_invalid_argument_and_one_log_line(
    server: ServerProcess,
) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        raw = channel.unary_unary(
            "/authorizer.v1.AuthorizerService/Login",
            request_serializer=lambda data: data,
            response_deserializer=lambda data: data,
        )
        with pytest.raises(grpc.RpcError) as raised:
            raw(b"\xff\xff\xff\xff garbage", timeout=30)
    error: Any = raised.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "the request is not a valid protobuf message for this method"
    log = server.stderr()
    assert "undecodable gRPC request to /authorizer.v1.AuthorizerService/Login" in log
    assert "Exception deserializing request" not in log
    assert "Traceback" not in log


def test_health_list_answers_every_service_it_advertises(server: ServerProcess) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        listed = stub.List(health_pb2.HealthListRequest(), timeout=30)
        for name in ("", "authorizer.v1.AuthorizerService"):
            checked = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=30)
            assert listed.statuses[name].status == checked.status == SERVING, name
