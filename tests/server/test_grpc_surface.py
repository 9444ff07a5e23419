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


def _grpc_samples(server: ServerProcess, method: str) -> dict[str, float]:
    """This server's ``bastion_grpc_*`` samples of ``method``, by name and code."""
    text = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).text
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("bastion_grpc_") and f'method="{method}"' in line:
            name, _, value = line.rpartition(" ")
            code = name.partition('code="')[2].partition('"')[0]
            found[f"{name.partition('{')[0]} {code}".strip()] = float(value)
    return found


def test_calls_are_counted_by_method_and_code_and_timed(
    server: ServerProcess, channel: grpc.Channel
) -> None:
    method = "/authorizer.v1.AuthorizerAdminService/AdminMeta"
    before = _grpc_samples(server, method)
    stub = admin_pb2_grpc.AuthorizerAdminServiceStub(channel)
    for _ in range(2):
        with pytest.raises(grpc.RpcError):
            stub.AdminMeta(admin_pb2.AdminMetaRequest(), timeout=10)
    admin = [("x-service-admin-secret", ADMIN_SECRET)]
    stub.AdminMeta(admin_pb2.AdminMetaRequest(), metadata=admin, timeout=10)
    raw = channel.unary_unary(method, request_serializer=bytes, response_deserializer=bytes)
    with pytest.raises(grpc.RpcError) as undecodable:
        raw(b"\xff\xff\xff\xff", metadata=admin, timeout=10)
    assert undecodable.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    after = _grpc_samples(server, method)
    grown = {key: after[key] - before.get(key, 0.0) for key in after}
    assert grown["bastion_grpc_requests_total UNAUTHENTICATED"] == 2
    assert grown["bastion_grpc_requests_total OK"] == 1
    assert grown["bastion_grpc_requests_total INVALID_ARGUMENT"] == 1
    assert grown["bastion_grpc_request_duration_seconds_count"] == 4
