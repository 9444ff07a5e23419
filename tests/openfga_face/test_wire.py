"""The OpenFGA face's wire details that the SDKs hide: status codes, error bodies, the
streamed answer's framing, the refusals OpenFGA gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.openfga_face.conftest import API_KEY, MODEL_DSL, model_json
from tests.server.harness import ServerProcess

DEFAULT_STORE = "00000000000000000000000000"


def test_status_codes_and_error_bodies(face: ServerProcess, tmp_path: Path) -> None:
    headers = {"authorization": f"Bearer {API_KEY}"}
    with httpx.Client(base_url=face.url, headers=headers, timeout=30) as http:

        def error(method: str, path: str, body: Any = None) -> tuple[int, str]:
            answer = http.request(method, path, json=body)
            return answer.status_code, answer.json()["code"]

        created = http.post("/stores", json={"name": "wire"})
        assert created.status_code == 201
        store = f"/stores/{created.json()['id']}"
        check = {"tuple_key": {"user": "user:a", "relation": "owner", "object": "folder:x"}}
        assert error("POST", f"{store}/check", check) == (
            400,
            "latest_authorization_model_not_found",
        )
        model = http.post(f"{store}/authorization-models", json=model_json(MODEL_DSL, tmp_path))
        assert model.status_code == 201
        assert error("POST", "/stores", {"name": "x"}) == (400, "validation_error")
        assert error("GET", "/stores/01ARZ3NDEKTSV4RRFFQ69G5FAV") == (404, "store_id_not_found")
        assert error("POST", f"{store}/write", {}) == (400, "invalid_write_input")
        key = check["tuple_key"]
        twice = {"writes": {"tuple_keys": [key]}, "deletes": {"tuple_keys": [key]}}
        assert error("POST", f"{store}/write", twice) == (
            400,
            "cannot_allow_duplicate_tuples_into_write_request",
        )
        assert error("POST", f"{store}/write", {"deletes": {"tuple_keys": [key]}}) == (
            400,
            "write_failed_due_to_invalid_input",
        )
        assert error("POST", f"{store}/read", {"page_size": 101}) == (400, "validation_error")
        assert error("POST", f"{store}/read", {"continuation_token": "!!"}) == (
            400,
            "invalid_continuation_token",
        )
        assert error("POST", f"{store}/list-objects", {"type": "nope", "relation": "r",
                     "user": "user:a"}) == (400, "type_not_found")  # fmt: skip
        assert error("DELETE", f"/stores/{DEFAULT_STORE}") == (400, "validation_error")
        bad_model = {"schema_version": "1.1", "type_definitions": [{"type": "user"}] * 2}
        assert error("POST", f"{store}/authorization-models", bad_model) == (
            400,
            "invalid_authorization_model",
        )

        for user in ("user:a", "user:b"):
            tuple_key = {"user": user, "relation": "owner", "object": "folder:x"}
            written = http.post(f"{store}/write", json={"writes": {"tuple_keys": [tuple_key]}})
            assert written.json() == {}
        streamed = http.post(
            f"{store}/streamed-list-objects",
            json={"type": "folder", "relation": "viewer", "user": "user:b"},
        )
        assert streamed.text == '{"result":{"object":"folder:x"}}\n'
        deleted = http.delete(store)
        assert deleted.status_code == 204
        assert error("POST", f"{store}/check", check) == (404, "store_id_not_found")
