"""Authorizer's newest Python SDK, ``authorizer-py`` 0.3.0 (PyPI), against bastion.

Every GraphQL document the SDK sends for a feature bastion has validates against
bastion's schema (its newer input type names, the newer output fields); the documents
of what bastion has not built yet, or leaves out of scope, are listed and still fail, so
this test says when one starts to work. Then the SDK itself, unchanged, signs up, logs
in, reads the profile and lists users as an admin over GraphQL (its default transport)
and REST against a running server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from authorizer import _dispatch as dispatch
from graphql import parse, validate

from bastion.transports.graphql.schema import build_schema
from tests.dbfixtures import fresh_sqlite_url
from tests.server.harness import ADMIN_SECRET, CLIENT_ID, ServerProcess, base_flags, running

#: Out of scope (architecture.md): organisations, clients, trusted issuers, SAML, SCIM.
OUT_OF_SCOPE_WORDS = frozenset(
    {"client", "clients", "trusted", "saml", "org", "organization", "organizations", "scim"}
)

DOCUMENTS = {
    name: spec.gql_query
    for table in (dispatch.PUBLIC, dispatch.ADMIN)
    for name, spec in table.items()
    if spec.gql_query
}


def _expected_to_work(name: str) -> bool:
    return not OUT_OF_SCOPE_WORDS & set(name.split("_"))


SCHEMA = build_schema({})


@pytest.mark.parametrize("name", sorted(n for n in DOCUMENTS if _expected_to_work(n)))
def test_the_sdks_document_validates(name: str) -> None:
    assert validate(SCHEMA, parse(DOCUMENTS[name])) == []


@pytest.mark.parametrize("name", sorted(n for n in DOCUMENTS if not _expected_to_work(n)))
def test_what_is_not_built_is_still_refused(name: str) -> None:
    assert validate(SCHEMA, parse(DOCUMENTS[name])) != []


def test_the_documents_cover_the_features_bastion_has() -> None:
    working = {n for n in DOCUMENTS if _expected_to_work(n)}
    assert {"signup", "login", "verify_otp", "session", "users", "webhooks",
            "email_templates", "verification_requests", "audit_logs"} <= working  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("authorizer-py")
    flags = [*base_flags("sqlite", fresh_sqlite_url(tmp)), "--app-cookie-secure=false"]
    with running(flags, tmp) as srv:
        yield srv


#: Runs the SDK in a process of its own: its bundled protobuf modules (authorizer-proto)
#: declare the same ``authorizer.v1`` names as bastion's and cannot share one
#: descriptor pool with them.
SDK_RUN = """
import json, sys
from authorizer import types as sdk
from authorizer.admin_client import AuthorizerAdminClient
from authorizer.client import AuthorizerClient

url, client_id, admin_secret, protocol, email = sys.argv[1:6]
headers = {"Origin": url}
client = AuthorizerClient(client_id, url, extra_headers=headers, protocol=protocol)
signed_up = client.signup(
    sdk.SignUpRequest(password="Sdk!pass123", confirm_password="Sdk!pass123", email=email)
)
logged_in = client.login(sdk.LoginRequest(password="Sdk!pass123", email=email))
profile = client.get_profile(headers={"Authorization": "Bearer " + logged_in.access_token})
client.close()
admin = AuthorizerAdminClient(url, admin_secret, extra_headers=headers, protocol=protocol)
listed = admin.users(sdk.ListUsersRequest(query=email.split("@")[0]))
admin.close()
print(json.dumps({
    "signup_token": bool(signed_up.access_token),
    "signup_email": signed_up.user.email if signed_up.user else None,
    "login_token": bool(logged_in.access_token),
    "profile_email": profile.email,
    "listed": [u.email for u in listed.users],
}))
"""


@pytest.mark.parametrize("protocol", ["graphql", "rest"])
def test_the_sdk_signs_up_logs_in_and_lists_users(server: ServerProcess, protocol: str) -> None:
    email = f"sdk{uuid.uuid4().hex[:8]}@example.com"
    done = subprocess.run(
        [sys.executable, "-c", SDK_RUN, server.url, CLIENT_ID, ADMIN_SECRET, protocol, email],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "signup_token": True,
        "signup_email": email,
        "login_token": True,
        "profile_email": email,
        "listed": [email],
    }


def test_admin_meta_answers_the_newer_mfa_flag(server: ServerProcess) -> None:
    with server.client() as http:
        answer = http.post(
            "/graphql",
            json={"query": "{ _admin_meta { roles is_multi_factor_auth_service_enabled } }"},
            headers={"x-authorizer-admin-secret": ADMIN_SECRET},
        )
    meta = answer.json()["data"]["_admin_meta"]
    assert meta["is_multi_factor_auth_service_enabled"] is False  # --enable-mfa's default
    assert meta["roles"]
