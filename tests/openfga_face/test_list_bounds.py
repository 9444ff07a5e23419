"""ListObjects and ListUsers bounded by the ``--fga-list-*`` flags as OpenFGA bounds them,
through real servers: a result bound on ListObjects and ListUsers that StreamedListObjects
does not have, its objects sent one message a line as they are found (chunked), and a
deadline that answers with what was confirmed (here nothing) rather than an error, on
both APIs (list_permissions says ``truncated``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.openfga_face.conftest import API_KEY, MODEL_DSL, model_json
from tests.server.harness import ADMIN_SECRET, ServerProcess, backend_storage, running

DEFAULT_STORE = "00000000000000000000000000"
FOLDERS = [f"folder:f{i}" for i in range(6)]


def start(tmp: Path, *bounds: str) -> Iterator[ServerProcess]:
    storage = backend_storage("sqlite", tmp, "bounds")
    with running([*storage.flags, f"--openfga-api-key={API_KEY}", *bounds], tmp) as server:
        with openfga(server) as http:
            model = http.post(
                f"/stores/{DEFAULT_STORE}/authorization-models", json=model_json(MODEL_DSL, tmp)
            )
            assert model.status_code == 201, model.text
            keys = [{"user": "user:anne", "relation": "owner", "object": f} for f in FOLDERS]
            written = http.post(
                f"/stores/{DEFAULT_STORE}/write", json={"writes": {"tuple_keys": keys}}
            )
            assert written.status_code == 200, written.text
        yield server


def openfga(server: ServerProcess) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {API_KEY}"}, timeout=30
    )


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from start(
        tmp_path_factory.mktemp("bounded"),
        "--fga-list-objects-max-results=4",
        "--fga-list-users-max-results=1",
    )


@pytest.fixture(scope="module")
def hurried(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Deadlines that have passed before any evaluation step."""
    yield from start(
        tmp_path_factory.mktemp("hurried"),
        "--fga-list-objects-deadline=0.000001",
        "--fga-list-users-deadline=0.000001",
    )


LIST = {"type": "folder", "relation": "viewer", "user": "user:anne"}
USERS = {
    "object": {"type": "folder", "id": "f0"},
    "relation": "viewer",
    "user_filters": [
        {"type": "user"},
    ],
}


def test_results_are_bounded_except_in_the_stream(bounded: ServerProcess) -> None:
    with openfga(bounded) as http:
        listed = http.post(f"/stores/{DEFAULT_STORE}/list-objects", json=LIST)
        assert listed.status_code == 200, listed.text
        assert len(listed.json()["objects"]) == 4
        assert set(listed.json()["objects"]) <= set(FOLDERS)
        with http.stream(
            "POST", f"/stores/{DEFAULT_STORE}/streamed-list-objects", json=LIST
        ) as streamed:
            assert streamed.status_code == 200
            assert streamed.headers["transfer-encoding"] == "chunked"
            lines = [json.loads(line) for line in streamed.iter_lines() if line]
        assert sorted(line["result"]["object"] for line in lines) == FOLDERS
        more = {**USERS, "contextual_tuples": {"tuple_keys": [
            {"user": "user:bob", "relation": "owner", "object": "folder:f0"}]}}  # fmt: skip
        users = http.post(f"/stores/{DEFAULT_STORE}/list-users", json=more)
        assert users.status_code == 200, users.text
        assert len(users.json()["users"]) == 1


def test_a_passed_deadline_answers_with_what_was_confirmed(hurried: ServerProcess) -> None:
    with openfga(hurried) as http:
        listed = http.post(f"/stores/{DEFAULT_STORE}/list-objects", json=LIST)
        assert (listed.status_code, listed.json()) == (200, {"objects": []})
        streamed = http.post(f"/stores/{DEFAULT_STORE}/streamed-list-objects", json=LIST)
        assert (streamed.status_code, streamed.text) == (200, "")
        users = http.post(f"/stores/{DEFAULT_STORE}/list-users", json=USERS)
        assert (users.status_code, users.json()) == (200, {"users": []})
    with hurried.client() as client:
        answer = client.post(
            "/v1/list_permissions",
            headers={"x-service-admin-secret": ADMIN_SECRET, "origin": hurried.url},
            json={"user": "user:anne", "object_type": "folder"},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["truncated"] is True
