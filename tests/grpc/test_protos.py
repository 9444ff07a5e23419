"""bastion's gRPC contract: generated modules match the .proto sources, and the wire names,
numbers and types match Authorizer's published schema.

``authorizer_proto_2_4_subset.json`` is a snapshot of the descriptors in the ``authorizer-proto``
PyPI package (Authorizer 2.4), cut down to the RPCs bastion serves (Authorizer 2.3) and the
messages they reach, with every 2.4 field of those messages. It is data taken once from that
package: importing the package here would clash with our own ``authorizer.v1`` descriptors in
the same process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor

from bastion.transports.grpc import build_protos
from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2, authorizer_pb2

SNAPSHOT: dict[str, Any] = json.loads(
    (Path(__file__).parent / "authorizer_proto_2_4_subset.json").read_text(encoding="utf-8")
)
SNAPSHOT_MESSAGES: dict[str, Any] = SNAPSHOT["messages"]

#: Authorizer 2.3 fields that 2.4 removed (reserving their names and numbers) and bastion keeps.
RESTORED_2_3_FIELDS = {
    ("authorizer.v1.SignupRequest", "is_multi_factor_auth_enabled"),
    ("authorizer.v1.DeleteUserRequest", "email"),
}

#: bastion's own additions, numbered from 1000 so no future Authorizer field can collide.
EXTENSIONS_FROM = 1000
BASTION_EXTENSIONS = {
    ("authorizer.v1.AuditLogsRequest", "resource"),
    ("authorizer.v1.User", "enrolled_mfa_methods"),
    ("authorizer.v1.UpdateProfileRequest", "otp"),
    ("authorizer.v1.UpdateProfileRequest", "regenerate_recovery_codes"),
    ("authorizer.v1.UpdateProfileResponse", "authenticator_recovery_codes"),
    ("authorizer.v1.PermissionCheckInput", "context"),
    ("authorizer.v1.PermissionCheckResult", "error"),
    ("authorizer.v1.ListPermissionsRequest", "context"),
    ("authorizer.v1.ListPermissionsRequest", "contextual_tuples"),
    ("authorizer.v1.FgaListUsersRequest", "context"),
    ("authorizer.v1.FgaListUsersRequest", "contextual_tuples"),
}

#: bastion's own RPCs (passkeys, issue 22) and the messages only they use: every field of
#: those messages is numbered from 1000 too.
BASTION_RPCS = {
    "authorizer.v1.AuthorizerService": ("WebauthnRenameCredential", "Sessions", "RevokeSession"),
    "authorizer.v1.AuthorizerAdminService": (
        "AdminWebauthnCredentials",
        "AdminWebauthnDeleteCredential",
        "AdminUserSessions",
        "AdminRevokeUserSession",
        "AdminRevokeAllUserSessions",
    ),
}
BASTION_MESSAGES = {
    "authorizer.v1.WebauthnRenameCredentialRequest",
    "authorizer.v1.WebauthnRenameCredentialResponse",
    "authorizer.v1.AdminWebauthnCredentialInfo",
    "authorizer.v1.AdminWebauthnCredentialsRequest",
    "authorizer.v1.AdminWebauthnCredentialsResponse",
    "authorizer.v1.AdminWebauthnDeleteCredentialRequest",
    "authorizer.v1.AdminWebauthnDeleteCredentialResponse",
    "authorizer.v1.SessionInfo",
    "authorizer.v1.SessionsRequest",
    "authorizer.v1.SessionsResponse",
    "authorizer.v1.RevokeSessionRequest",
    "authorizer.v1.RevokeSessionResponse",
    "authorizer.v1.AdminSessionInfo",
    "authorizer.v1.AdminUserSessionsRequest",
    "authorizer.v1.AdminUserSessionsResponse",
    "authorizer.v1.AdminRevokeUserSessionRequest",
    "authorizer.v1.AdminRevokeUserSessionResponse",
    "authorizer.v1.AdminRevokeAllUserSessionsRequest",
    "authorizer.v1.AdminRevokeAllUserSessionsResponse",
}
#: bastion's own requests that carry nothing but the caller.
EMPTY_REQUESTS = {"authorizer.v1.SessionsRequest"}

_SCALAR_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in vars(FieldDescriptor).items()
    if name.startswith("TYPE_") and name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")
}


def wire_type(field: FieldDescriptor) -> str:
    if field.message_type is not None:
        return field.message_type.full_name
    if field.enum_type is not None:
        return field.enum_type.full_name
    return _SCALAR_NAMES[field.type]


def cardinality(field: FieldDescriptor) -> str:
    if field.is_repeated:
        return "repeated"
    oneof = field.containing_oneof
    if oneof is not None and oneof.name == f"_{field.name}":
        return "optional"  # proto3 `optional`: a synthetic one-field oneof
    return "singular"


def describe(field: FieldDescriptor) -> dict[str, Any]:
    return {"number": field.number, "type": wire_type(field), "cardinality": cardinality(field)}


def our_message(full_name: str) -> Descriptor:
    return descriptor_pool.Default().FindMessageTypeByName(full_name)


def reserved(message: Descriptor) -> tuple[set[int], set[str]]:
    proto = descriptor_pb2.DescriptorProto()
    message.CopyToProto(proto)
    numbers = {n for r in proto.reserved_range for n in range(r.start, r.end)}
    return numbers, set(proto.reserved_name)


OUR_SERVICES: dict[str, ServiceDescriptor] = {
    service.full_name: service
    for service in (
        authorizer_pb2.DESCRIPTOR.services_by_name["AuthorizerService"],
        admin_pb2.DESCRIPTOR.services_by_name["AuthorizerAdminService"],
    )
}


def our_messages() -> set[str]:
    """Every message declared in our authorizer.v1 sources."""
    names: set[str] = set()
    for module in (authorizer_pb2, admin_pb2):
        for dependency in (module.DESCRIPTOR, *module.DESCRIPTOR.dependencies):
            if dependency.package == "authorizer.v1":
                names.update(m.full_name for m in dependency.message_types_by_name.values())
    return names


# ---------------------------------------------------------------- generated code


def test_checked_in_modules_match_a_fresh_build() -> None:
    assert build_protos.check() == []
    assert build_protos.main(["--check"]) == 0


def test_check_reports_changed_missing_and_stale_modules(tmp_path: Path) -> None:
    fresh = build_protos.generate(tmp_path / "fresh")
    tree = tmp_path / "tree"
    shutil.copytree(fresh, tree)
    assert build_protos.differences(fresh, tree) == []

    with (tree / "types_pb2.py").open("a", encoding="utf-8") as fh:
        fh.write("# edited by hand\n")
    (tree / "admin_pb2_grpc.py").unlink()
    (tree / "old_pb2.py").write_text("", encoding="utf-8")

    assert build_protos.differences(fresh, tree) == [
        "missing: admin_pb2_grpc.py",
        "not generated by any source: old_pb2.py",
        "differs: types_pb2.py",
    ]


def test_build_generates_every_module_the_package_imports(tmp_path: Path) -> None:
    fresh = build_protos.generate(tmp_path)
    stems = [p.stem for p in build_protos.proto_sources()]
    assert stems == ["admin", "authorizer", "common", "pagination", "types"]
    expected = {f"{stem}_pb2.py" for stem in stems} | {f"{stem}_pb2.pyi" for stem in stems}
    expected |= {"authorizer_pb2_grpc.py", "admin_pb2_grpc.py"}
    assert build_protos.generated_names(fresh) == expected


def test_generated_modules_import_inside_our_package() -> None:
    text = (build_protos.PROTO_DIR / "admin_pb2.py").read_text(encoding="utf-8")
    assert "from bastion.transports.grpc.proto.authorizer.v1 import types_pb2" in text
    grpc_text = (build_protos.PROTO_DIR / "admin_pb2_grpc.py").read_text(encoding="utf-8")
    assert "from bastion.transports.grpc.proto.authorizer.v1 import admin_pb2" in grpc_text


# ---------------------------------------------------------------- wire compatibility


def test_snapshot_names_its_source() -> None:
    assert SNAPSHOT["source"]["package"] == "authorizer-proto"
    assert SNAPSHOT["source"]["version"] == "0.2.0"


def test_services_keep_the_2_3_rpcs_with_authorizers_names_and_types() -> None:
    assert set(OUR_SERVICES) == set(SNAPSHOT["services"])
    for service_name, methods in SNAPSHOT["services"].items():
        ours = list(OUR_SERVICES[service_name].methods)
        theirs = [m for m in ours if m.name not in BASTION_RPCS[service_name]]
        assert [m.name for m in theirs] == list(methods), service_name
        for method in theirs:
            assert {
                "input": method.input_type.full_name,
                "output": method.output_type.full_name,
            } == methods[method.name], f"{service_name}.{method.name}"


def test_rpc_paths_on_the_wire() -> None:
    stub_paths = {
        f"/{service.full_name}/{method.name}"
        for service in OUR_SERVICES.values()
        for method in service.methods
    }
    assert "/authorizer.v1.AuthorizerService/Signup" in stub_paths
    assert "/authorizer.v1.AuthorizerAdminService/FgaReset" in stub_paths
    assert "/authorizer.v1.AuthorizerService/WebauthnLoginVerify" in stub_paths
    assert len(OUR_SERVICES["authorizer.v1.AuthorizerService"].methods) == 20 + 6 + 1 + 5 + 2
    assert len(OUR_SERVICES["authorizer.v1.AuthorizerAdminService"].methods) == 32 + 2 + 3


def test_we_declare_exactly_the_messages_the_2_3_rpcs_reach() -> None:
    assert our_messages() == set(SNAPSHOT_MESSAGES) | BASTION_MESSAGES


@pytest.mark.parametrize("message_name", sorted(BASTION_MESSAGES))
def test_bastions_own_messages_number_from_1000(message_name: str) -> None:
    fields = our_message(message_name).fields
    assert fields or message_name in EMPTY_REQUESTS
    assert all(field.number >= EXTENSIONS_FROM for field in fields)


@pytest.mark.parametrize("message_name", sorted(SNAPSHOT_MESSAGES))
def test_shared_fields_have_authorizers_numbers_and_types(message_name: str) -> None:
    ours = our_message(message_name)
    theirs: dict[str, Any] = SNAPSHOT_MESSAGES[message_name]["fields"]
    for field in ours.fields:
        if field.name in theirs:
            assert describe(field) == theirs[field.name], f"{message_name}.{field.name}"


@pytest.mark.parametrize("message_name", sorted(SNAPSHOT_MESSAGES))
def test_2_4_fields_left_out_stay_reserved(message_name: str) -> None:
    ours = our_message(message_name)
    reserved_numbers, reserved_names = reserved(ours)
    for name, field in SNAPSHOT_MESSAGES[message_name]["fields"].items():
        if name not in ours.fields_by_name:
            assert field["number"] in reserved_numbers, f"{message_name}.{name}"
            assert name in reserved_names, f"{message_name}.{name}"


@pytest.mark.parametrize("message_name", sorted(SNAPSHOT_MESSAGES))
def test_fields_beyond_2_4_only_restore_2_3_fields(message_name: str) -> None:
    snapshot = SNAPSHOT_MESSAGES[message_name]
    numbers_in_2_4 = {f["number"] for f in snapshot["fields"].values()}
    for field in our_message(message_name).fields:
        if field.name in snapshot["fields"]:
            continue
        where = f"{message_name}.{field.name}"
        if (message_name, field.name) in BASTION_EXTENSIONS:
            assert field.number >= EXTENSIONS_FROM, where
            continue
        assert (message_name, field.name) in RESTORED_2_3_FIELDS, where
        assert field.number not in numbers_in_2_4, where
        # 2.4 reserved both the number and the name: the field comes back as it was in 2.3.
        assert field.number in snapshot["reserved_numbers"], where
        assert field.name in snapshot["reserved_names"], where


def test_every_restored_field_is_present() -> None:
    for message_name, field_name in RESTORED_2_3_FIELDS:
        assert field_name in our_message(message_name).fields_by_name


def test_delete_user_takes_email_beside_id() -> None:
    fields = {f.name: describe(f) for f in our_message("authorizer.v1.DeleteUserRequest").fields}
    assert fields == {
        "email": {"number": 1, "type": "string", "cardinality": "singular"},
        "id": {"number": 2, "type": "string", "cardinality": "singular"},
    }
    request = admin_pb2.DeleteUserRequest(email="ada@example.com")
    assert request.SerializeToString() == b"\x0a\x0fada@example.com"
    assert admin_pb2.DeleteUserRequest.FromString(b"\x12\x02u1").id == "u1"


def test_proto3_optional_fields_track_presence() -> None:
    request = admin_pb2.UpdateUserRequest(id="u1")
    assert not request.HasField("email_verified")
    request.email_verified = False
    assert request.HasField("email_verified")
    signup = authorizer_pb2.SignupRequest(is_multi_factor_auth_enabled=False)
    assert signup.HasField("is_multi_factor_auth_enabled")
