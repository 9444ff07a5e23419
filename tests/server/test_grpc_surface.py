"""The authorizer.v1 services over a real gRPC socket, answering as REST does."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import httpx
import pytest
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from bastion.transports.grpc.proto.authorizer.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    authorizer_pb2,
    authorizer_pb2_grpc,
)
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("grpc")
    with running(base_flags("sqlite", str(tmp / "bastion.db")), tmp) as srv:
        yield srv


@pytest.fixture
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
        yield ch


def test_meta_matches_rest(server: ServerProcess, channel: grpc.Channel) -> None:
    meta = authorizer_pb2_grpc.AuthorizerServiceStub(channel).Meta(
        authorizer_pb2.MetaRequest(), timeout=10
    )
    rest = httpx.get(server.url + "/v1/meta").json()
    assert meta.client_id == rest["client_id"] == "test-client"
    assert meta.version == rest["version"]
    assert meta.is_sign_up_enabled == rest["is_sign_up_enabled"]


def test_admin_service_needs_credentials(channel: grpc.Channel) -> None:
    stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
    with pytest.raises(grpc.RpcError) as refused:
        stub.AdminMeta(admin_pb2.AdminMetaRequest(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert refused.value.details() == "unauthorized"
    reply = stub.AdminMeta(
        admin_pb2.AdminMetaRequest(),
        metadata=[("x-service-admin-secret", ADMIN_SECRET)],
        timeout=10,
    )
    assert list(reply.admin_meta.roles) == ["user"]
    assert list(reply.admin_meta.default_roles) == ["user"]


def test_admin_login_cookie_in_metadata(channel: grpc.Channel) -> None:
    stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
    reply, call = stub.AdminLogin.with_call(
        admin_pb2.AdminLoginRequest(admin_secret=ADMIN_SECRET), timeout=10
    )
    assert reply.message == "admin logged in successfully"
    cookies = [v for k, v in call.initial_metadata() if k == "set-cookie"]
    assert len(cookies) == 1
    assert cookies[0].startswith("service-admin=")
    assert "HttpOnly" in cookies[0]
    value = cookies[0].split(";")[0]
    meta = stub.AdminMeta(admin_pb2.AdminMetaRequest(), metadata=[("cookie", value)], timeout=10)
    assert list(meta.admin_meta.roles) == ["user"]


def test_errors_have_the_rest_message(channel: grpc.Channel) -> None:
    stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
    with pytest.raises(grpc.RpcError) as wrong:
        stub.AdminLogin(admin_pb2.AdminLoginRequest(admin_secret="nope"), timeout=10)
    assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert wrong.value.details() == "invalid admin secret"
    with pytest.raises(grpc.RpcError) as empty:
        stub.AdminLogin(admin_pb2.AdminLoginRequest(), timeout=10)
    assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert empty.value.details() == "admin_secret is required"


def test_verify_otp_without_a_challenge_is_unauthenticated(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        authorizer_pb2_grpc.AuthorizerServiceStub(channel).VerifyOtp(
            authorizer_pb2.VerifyOtpRequest(email="a@b.test", otp="123456"), timeout=10
        )
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_reflection_lists_both_services(channel: grpc.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
    )
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert {"authorizer.v1.AuthorizerService", "authorizer.v1.AuthorizerAdminService"} <= names
