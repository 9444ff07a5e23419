"""OpenFGA's Python SDK (``openfga-sdk``, sync and async clients) against bastion's OpenFGA
face, on SQLite and PostgreSQL: stores, models, tuples, every query, changes, assertions;
the default store is the one ``check_permissions`` answers from."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from openfga_sdk.client import ClientConfiguration
from openfga_sdk.client import OpenFgaClient as AsyncClient
from openfga_sdk.client.models import (
    ClientAssertion,
    ClientBatchCheckItem,
    ClientBatchCheckRequest,
    ClientCheckRequest,
    ClientExpandRequest,
    ClientListObjectsRequest,
    ClientReadChangesRequest,
    ClientTuple,
    ClientWriteRequest,
)
from openfga_sdk.client.models.list_users_request import ClientListUsersRequest
from openfga_sdk.client.models.write_conflict_opts import (
    ClientWriteRequestOnDuplicateWrites,
    ClientWriteRequestOnMissingDeletes,
    ConflictOptions,
)
from openfga_sdk.credentials import CredentialConfiguration, Credentials
from openfga_sdk.exceptions import (
    NotFoundException,
    UnauthorizedException,
    ValidationException,
)
from openfga_sdk.models.create_store_request import CreateStoreRequest
from openfga_sdk.models.fga_object import FgaObject
from openfga_sdk.models.read_request_tuple_key import ReadRequestTupleKey
from openfga_sdk.models.user_type_filter import UserTypeFilter
from openfga_sdk.models.write_authorization_model_request import (
    WriteAuthorizationModelRequest,
)
from openfga_sdk.sync import OpenFgaClient

from tests.openfga_face.conftest import API_KEY, MODEL_DSL, model_json
from tests.server.harness import ADMIN_SECRET, ServerProcess, backend_storage, running

DEFAULT_STORE = "00000000000000000000000000"


def configuration(url: str, key: str = API_KEY, store_id: str | None = None) -> Any:
    return ClientConfiguration(
        api_url=url,
        store_id=store_id,
        credentials=Credentials(
            method="api_token", configuration=CredentialConfiguration(api_token=key)
        ),
    )


def write_model(client: Any, tmp: Path) -> str:
    body = WriteAuthorizationModelRequest(**model_json(MODEL_DSL, tmp))
    return str(client.write_authorization_model(body).authorization_model_id)


def test_sync_client_covers_the_api(face: ServerProcess, tmp_path: Path) -> None:
    with OpenFgaClient(configuration(face.url)) as fga:
        store = fga.create_store(CreateStoreRequest(name="sync-store"))
        assert len(store.id) == 26
        fga.set_store_id(store.id)
        assert fga.get_store().name == "sync-store"
        assert store.id in [s.id for s in fga.list_stores().stores]
        model_id = write_model(fga, tmp_path)
        fga.set_authorization_model_id(model_id)
        latest = fga.read_latest_authorization_model().authorization_model
        assert latest.id == model_id
        assert {t.type for t in latest.type_definitions} == {"user", "group", "folder", "doc"}

        fga.write_tuples(
            [
                ClientTuple("user:anne", "member", "group:eng"),
                ClientTuple("group:eng#member", "viewer", "folder:f1"),
                ClientTuple("folder:f1", "parent", "doc:d1"),
                ClientTuple("user:carl", "viewer", "doc:d1"),
                ClientTuple("user:carl", "blocked", "doc:d1"),
                ClientTuple(
                    "user:dana",
                    "viewer",
                    "folder:f2",
                    condition={
                        "name": "in_window",
                        "context": {"grant_expiry": "2030-01-01T00:00:00Z"},
                    },
                ),
            ]
        )
        read = fga.read(ReadRequestTupleKey(object="doc:d1"))
        assert sorted((t.key.user, t.key.relation) for t in read.tuples) == [
            ("folder:f1", "parent"),
            ("user:carl", "blocked"),
            ("user:carl", "viewer"),
        ]
        assert read.tuples[0].timestamp is not None

        assert fga.check(ClientCheckRequest("user:anne", "can_read", "doc:d1")).allowed
        assert not fga.check(ClientCheckRequest("user:carl", "can_read", "doc:d1")).allowed
        before = {"current_time": "2029-12-31T00:00:00Z"}
        after = {"current_time": "2030-06-01T00:00:00Z"}
        dana = ClientCheckRequest("user:dana", "viewer", "folder:f2", context=before)
        assert fga.check(dana).allowed
        dana.context = after
        assert not fga.check(dana).allowed
        # a contextual tuple counts for its request only
        contextual = ClientCheckRequest(
            "user:erin",
            "viewer",
            "doc:d1",
            contextual_tuples=[ClientTuple("user:erin", "member", "group:eng")],
        )
        assert fga.check(contextual).allowed

        batch = fga.batch_check(
            ClientBatchCheckRequest(
                checks=[
                    ClientBatchCheckItem("user:anne", "can_read", "doc:d1", correlation_id="a"),
                    ClientBatchCheckItem("user:carl", "can_read", "doc:d1", correlation_id="c"),
                    # missing a condition parameter: an error of its own, the batch answers
                    ClientBatchCheckItem("user:dana", "viewer", "folder:f2", correlation_id="d"),
                ]
            )
        )
        by_id = {r.correlation_id: r for r in batch.result}
        assert by_id["a"].allowed
        assert not by_id["c"].allowed
        assert "current_time" in by_id["d"].error.message

        tree = fga.expand(ClientExpandRequest("viewer", "folder:f1")).tree
        assert tree.root.name == "folder:f1#viewer"

        objects = fga.list_objects(ClientListObjectsRequest("user:anne", "can_read", "doc"))
        assert objects.objects == ["doc:d1"]
        streamed = list(
            fga.streamed_list_objects(ClientListObjectsRequest("user:anne", "viewer", "folder"))
        )
        assert [s.object for s in streamed] == ["folder:f1"]

        users = fga.list_users(
            ClientListUsersRequest(
                object=FgaObject(type="folder", id="f1"),
                relation="viewer",
                user_filters=[UserTypeFilter(type="user")],
            )
        ).users
        assert [(u.object.type, u.object.id) for u in users] == [("user", "anne")]
        usersets = fga.list_users(
            ClientListUsersRequest(
                object=FgaObject(type="folder", id="f1"),
                relation="viewer",
                user_filters=[UserTypeFilter(type="group", relation="member")],
            )
        ).users
        assert [(u.userset.type, u.userset.id) for u in usersets] == [("group", "eng")]

        fga.delete_tuples([ClientTuple("user:carl", "blocked", "doc:d1")])
        assert fga.check(ClientCheckRequest("user:carl", "can_read", "doc:d1")).allowed
        changes = fga.read_changes(ClientReadChangesRequest(type="doc"))
        operations = [(c.operation, c.tuple_key.relation) for c in changes.changes]
        assert operations[-1] == ("TUPLE_OPERATION_DELETE", "blocked")
        assert len(operations) == 4

        fga.write_assertions([ClientAssertion("user:anne", "can_read", "doc:d1", expectation=True)])
        [assertion] = fga.read_assertions().assertions
        assert (assertion.tuple_key.user, assertion.expectation) == ("user:anne", True)

        fga.delete_store()
        with pytest.raises(NotFoundException):
            fga.get_store()


def test_write_conflicts_and_their_options(face: ServerProcess, tmp_path: Path) -> None:
    with OpenFgaClient(configuration(face.url)) as fga:
        fga.set_store_id(fga.create_store(CreateStoreRequest(name="conflicts")).id)
        write_model(fga, tmp_path)
        anne = ClientTuple("user:anne", "owner", "folder:x")
        fga.write_tuples([anne])
        with pytest.raises(ValidationException) as refused:
            fga.write_tuples([anne])
        assert refused.value.parsed_exception.code == "write_failed_due_to_invalid_input"
        ignore = ConflictOptions(
            on_duplicate_writes=ClientWriteRequestOnDuplicateWrites.IGNORE,
            on_missing_deletes=ClientWriteRequestOnMissingDeletes.IGNORE,
        )
        missing = ClientTuple("user:bob", "owner", "folder:x")
        fga.write(ClientWriteRequest(writes=[anne], deletes=[missing]), {"conflict": ignore})
        with pytest.raises(ValidationException):
            fga.delete_tuples([missing])
        with pytest.raises(ValidationException) as bad:
            fga.write_tuples([ClientTuple("user:anne", "nope", "folder:x")])
        assert bad.value.parsed_exception.code == "validation_error"


def test_stores_are_isolated_and_the_default_store_is_check_permissions(
    face: ServerProcess, tmp_path: Path
) -> None:
    with OpenFgaClient(configuration(face.url, store_id=DEFAULT_STORE)) as fga:
        write_model(fga, tmp_path)
        fga.write_tuples([ClientTuple("user:zoe", "owner", "folder:shared")])
        other = fga.create_store(CreateStoreRequest(name="other")).id
        fga.set_store_id(other)
        write_model(fga, tmp_path)
        assert not fga.check(ClientCheckRequest("user:zoe", "viewer", "folder:shared")).allowed
        assert fga.read(ReadRequestTupleKey()).tuples == []
    answer = httpx.post(
        f"{face.url}/v1/check_permissions",
        headers={"x-service-admin-secret": ADMIN_SECRET, "origin": face.url},
        json={"user": "user:zoe", "checks": [{"relation": "viewer", "object": "folder:shared"}]},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["results"][0]["allowed"] is True


def test_the_key_is_required(face: ServerProcess) -> None:
    with (
        OpenFgaClient(configuration(face.url, key="wrong-key")) as fga,
        pytest.raises(UnauthorizedException),
    ):
        fga.list_stores()
    bare = httpx.get(f"{face.url}/stores")
    assert bare.status_code == 401
    assert bare.json() == {"code": "bearer_token_missing", "message": "missing bearer token"}
    unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    with (
        OpenFgaClient(configuration(face.url, store_id=unknown)) as fga,
        pytest.raises(NotFoundException),
    ):
        fga.get_store()


def test_off_without_the_flag(tmp_path: Path) -> None:
    storage = backend_storage("sqlite", tmp_path, "openfga-off")
    with running(storage.flags, tmp_path) as server:
        answer = httpx.get(f"{server.url}/stores", headers={"authorization": f"Bearer {API_KEY}"})
    assert answer.status_code == 404


def test_async_client(face: ServerProcess, tmp_path: Path) -> None:
    body = WriteAuthorizationModelRequest(**model_json(MODEL_DSL, tmp_path))

    async def scenario() -> None:
        async with AsyncClient(configuration(face.url)) as fga:
            store = await fga.create_store(CreateStoreRequest(name="async-store"))
            fga.set_store_id(store.id)
            model = await fga.write_authorization_model(body)
            fga.set_authorization_model_id(model.authorization_model_id)
            await fga.write_tuples([ClientTuple("user:ann", "owner", "folder:a")])
            check = ClientCheckRequest("user:ann", "viewer", "folder:a")
            assert (await fga.check(check)).allowed
            listed = await fga.list_objects(
                ClientListObjectsRequest("user:ann", "viewer", "folder")
            )
            assert listed.objects == ["folder:a"]
            await fga.delete_tuples([ClientTuple("user:ann", "owner", "folder:a")])
            assert not (await fga.check(check)).allowed
            await fga.delete_store()

    asyncio.run(scenario())


def test_a_named_older_model_answers(face: ServerProcess, tmp_path: Path) -> None:
    older_dsl = "model\n  schema 1.1\n\ntype user\n\ntype folder\n  relations\n"
    older_dsl += "    define owner: [user]\n    define viewer: owner\n"
    with OpenFgaClient(configuration(face.url)) as fga:
        fga.set_store_id(fga.create_store(CreateStoreRequest(name="versions")).id)
        older = WriteAuthorizationModelRequest(**model_json(older_dsl, tmp_path))
        older_id = fga.write_authorization_model(older).authorization_model_id
        newer_id = write_model(fga, tmp_path)
        fga.write_tuples([ClientTuple("user:ann", "owner", "folder:a")])
        assert fga.read_latest_authorization_model().authorization_model.id == newer_id
        check = ClientCheckRequest("user:ann", "viewer", "folder:a")
        assert fga.check(check, {"authorization_model_id": older_id}).allowed
        # folders have a parent in the newer model only
        parent = ClientCheckRequest("folder:b", "parent", "folder:a")
        assert not fga.check(parent).allowed
        with pytest.raises(ValidationException) as refused:
            fga.check(parent, {"authorization_model_id": older_id})
        assert refused.value.parsed_exception.code == "validation_error"
        with pytest.raises(ValidationException) as unknown:
            fga.check(check, {"authorization_model_id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
        assert unknown.value.parsed_exception.code == "authorization_model_not_found"
