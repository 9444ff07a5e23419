"""Talk to a running server over gRPC with Authorizer's own published client stubs.

Not a pytest module: it needs the ``authorizer-proto[grpc]`` package, whose ``authorizer.v1``
descriptors clash with bastion's own in one process, so it runs in a separate virtualenv
(tests/server/test_grpc_authorizer_proto.py builds one and drives this script):

    python -m venv /tmp/apvenv && /tmp/apvenv/bin/pip install "authorizer-proto[grpc]==0.2.0"
    /tmp/apvenv/bin/python tests/grpc/authorizer_proto_probe.py 127.0.0.1:9091

It calls Meta, Signup, Login, Profile and CheckPermissions as a stock Authorizer client would
(the server must allow sign-up without email verification), prints one JSON line per call and
exits 0 only if every answer has the shape Authorizer's clients expect.

Before CheckPermissions it reads one line from stdin: the caller (tests/server/
test_grpc_authorizer_proto.py) has by then seen the Profile line, written the authorization
model and the tuple ``user:<id> viewer doc:probe`` for that user, and answers with a newline.
The logged-in user must then be a viewer of ``doc:probe`` and not of ``doc:other``.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from collections.abc import Sequence

import grpc
from authorizer_proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc, types_pb2


class ProbeFailed(Exception):
    pass


def report(rpc: str, **facts: object) -> None:
    print(json.dumps({"rpc": rpc, **facts}, sort_keys=True), flush=True)


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise ProbeFailed(what)


def probe(channel: grpc.Channel, *, timeout: float) -> None:
    stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)

    meta = stub.Meta(authorizer_pb2.MetaRequest(), timeout=timeout)
    report("Meta", version=meta.version, is_sign_up_enabled=meta.is_sign_up_enabled)
    expect(meta.client_id != "", "Meta.client_id is empty")

    email = f"probe-{secrets.token_hex(6)}@example.com"
    password = f"Pr0be!{secrets.token_urlsafe(12)}"
    signup = stub.Signup(
        authorizer_pb2.SignupRequest(email=email, password=password, confirm_password=password),
        timeout=timeout,
    )
    report("Signup", message=signup.message, user_email=signup.user.email)
    expect(signup.user.email == email, "Signup did not return the new user")

    login = stub.Login(authorizer_pb2.LoginRequest(email=email, password=password), timeout=timeout)
    report("Login", has_access_token=bool(login.access_token), expires_in=login.expires_in)
    expect(login.access_token != "", "Login returned no access token")
    bearer = (("authorization", f"Bearer {login.access_token}"),)

    profile = stub.Profile(authorizer_pb2.ProfileRequest(), metadata=bearer, timeout=timeout)
    report("Profile", id=profile.id, email=profile.email, roles=list(profile.roles))
    expect(profile.email == email and profile.id == login.user.id, "Profile is not the caller")

    sys.stdin.readline()  # the grant for this user is written
    checks = [
        types_pb2.PermissionCheckInput(relation="viewer", object="doc:probe"),
        types_pb2.PermissionCheckInput(relation="viewer", object="doc:other"),
    ]
    permissions = stub.CheckPermissions(
        authorizer_pb2.CheckPermissionsRequest(checks=checks), metadata=bearer, timeout=timeout
    )
    results = [(r.relation, r.object, r.allowed) for r in permissions.results]
    report("CheckPermissions", results=results)
    expect(
        results == [("viewer", "doc:probe", True), ("viewer", "doc:other", False)],
        "CheckPermissions did not answer for the logged-in user",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="host:port of the gRPC listener, e.g. 127.0.0.1:9091")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call")
    args = parser.parse_args(argv)
    with grpc.insecure_channel(args.target) as channel:
        try:
            probe(channel, timeout=args.timeout)
        except ProbeFailed as failure:
            print(f"probe failed: {failure}", file=sys.stderr)
            return 1
        except grpc.RpcError as error:
            print(f"probe failed: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
    print("probe passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
