"""POST /graphql over real HTTP, on the same service layer as REST."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("graphql")
    flags = [*base_flags("sqlite", str(tmp / "bastion.db")), "--admin-cookie-secure=false"]
    with running(flags, tmp) as srv:
        yield srv


def _gql(client: httpx.Client, query: str, **kwargs: object) -> httpx.Response:
    return client.post("/graphql", json={"query": query, **kwargs})


def test_meta_matches_rest(server: ServerProcess) -> None:
    with server.client() as client:
        rest = client.get("/v1/meta").json()
        response = _gql(
            client, "{ meta { version client_id is_sign_up_enabled is_google_login_enabled } }"
        )
        assert response.status_code == 200
        meta = response.json()["data"]["meta"]
        assert meta == {k: rest[k] for k in meta}


def test_admin_login_sets_a_real_cookie_and_sibling_fields_run(server: ServerProcess) -> None:
    with server.client() as client:
        login = _gql(
            client,
            "mutation($p: AdminLoginRequest!) { _admin_login(params: $p) { message } }",
            variables={"p": {"admin_secret": ADMIN_SECRET}},
        )
        assert login.json() == {
            "data": {"_admin_login": {"message": "admin logged in successfully"}}
        }
        assert login.headers["set-cookie"].startswith("service-admin=")
        # Two async root fields in one query (graphql-core gathers them concurrently).
        both = _gql(
            client, "{ meta { client_id } _admin_meta { roles default_roles protected_roles } }"
        )
        assert both.json() == {
            "data": {
                "meta": {"client_id": "test-client"},
                "_admin_meta": {
                    "roles": ["user"],
                    "default_roles": ["user"],
                    "protected_roles": [],
                },
            }
        }


def test_errors_carry_the_rest_code(server: ServerProcess) -> None:
    with server.client() as client:
        wrong = _gql(
            client,
            'mutation { _admin_login(params: {admin_secret: "nope"}) { message } }',
        ).json()
        rest = client.post("/v1/admin/login", json={"admin_secret": "nope"}).json()
        assert wrong["data"] is None
        assert wrong["errors"][0]["message"] == rest["message"] == "invalid admin secret"
        assert wrong["errors"][0]["extensions"]["code"] == rest["code"] == "unauthenticated"
        anonymous = _gql(client, "{ _admin_meta { roles } meta { client_id } }").json()
        # A failing field beside a succeeding sibling: the sibling's data survives.
        assert anonymous["errors"][0]["extensions"]["code"] == "unauthenticated"
        assert anonymous["errors"][0]["path"] == ["_admin_meta"]


def test_deprecated_operations(server: ServerProcess) -> None:
    with server.client() as client:
        body = _gql(client, "mutation { _update_env(params: {}) { message } }").json()
        assert body["errors"][0]["message"] == "deprecated. please configure env via cli args"


def test_client_id_header(server: ServerProcess) -> None:
    with server.client() as client:
        ok = client.post(
            "/graphql",
            json={"query": "{ meta { client_id } }"},
            headers={"x-authorizer-client-id": "test-client"},
        )
        assert ok.status_code == 200
        bad = client.post(
            "/graphql",
            json={"query": "{ meta { client_id } }"},
            headers={"x-authorizer-client-id": "other"},
        )
        assert bad.status_code == 400
        assert bad.json() == {
            "error": "invalid_client_id",
            "error_description": "The client id is invalid",
        }


def test_csrf_applies_to_graphql(server: ServerProcess) -> None:
    refused = httpx.post(server.url + "/graphql", json={"query": "{ meta { client_id } }"})
    assert refused.status_code == 403
    assert refused.json()["code"] == "permission_denied"


def test_query_is_required(server: ServerProcess) -> None:
    with server.client() as client:
        response = client.post("/graphql", json={})
        assert response.status_code == 400
        assert response.json() == {"code": "invalid_argument", "message": "query is required"}
