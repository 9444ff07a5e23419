"""OpenFGA's own API over the engine's stores (issue 25): stores, authorization models,
Write / Read / ReadChanges, assertions; the queries are :mod:`service.fga.openfga_queries`.

The Authorizer-shaped API uses the default store; a tuple written here into that store is
seen by ``check_permissions`` on the next request, on every process (the same changelog).
Each method takes the store id and the decoded JSON body (or query) and answers OpenFGA's
JSON; refusals are :class:`~service.fga.openfga_input.OpenFgaError`. Every change is in
the audit log (``openfga.*``), as the ``_fga_*`` operations' are.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.dsl_printer import UnsupportedDslError, print_model
from bastion.core.fga.errors import FgaError
from bastion.core.fga.model import ModelFormatError, model_from_json, model_to_json
from bastion.core.fga.tuples import TupleKey
from bastion.core.fga.validation import check_model
from bastion.service.context import CallerContext
from bastion.service.fga.base import _write_problem, new_model_id
from bastion.service.fga.openfga_input import (
    MAX_TUPLES_PER_WRITE,
    OpenFgaError,
    page_size,
    rfc3339,
    tuple_json,
    tuple_key,
    tuple_keys,
    validation,
)
from bastion.service.fga.openfga_queries import OpenFgaQueries
from bastion.storage.fga import StoredModel, TupleConflict, TupleFilter, WriteOptions
from bastion.storage.fga_stores import DEFAULT_FGA_STORE, StoreInfo

__all__ = ["OpenFgaError", "OpenFgaService"]

_OPERATIONS = {"write": "TUPLE_OPERATION_WRITE", "delete": "TUPLE_OPERATION_DELETE"}


def _store_json(info: StoreInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "name": info.name,
        "created_at": rfc3339(info.created_at),
        "updated_at": rfc3339(info.updated_at),
    }


def _model_json(model_id: str, dsl: str) -> dict[str, Any]:
    return {**model_to_json(parse_model(dsl)), "id": model_id}


def _option(raw: Mapping[str, Any], name: str, default: str) -> bool:
    """``on_duplicate`` / ``on_missing``: ``error`` (the default) or ``ignore``."""
    value = raw.get(name) or default
    if value not in ("error", "ignore"):
        raise validation(f"{name} must be 'error' or 'ignore'")
    return bool(value == "ignore")


def _token(raw: Any) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise validation("continuation_token must be a string")
    return raw


def _bad_token() -> OpenFgaError:
    return OpenFgaError(400, "invalid_continuation_token", "Invalid continuation token")


class OpenFgaService(OpenFgaQueries):
    # -- stores --------------------------------------------------------------------------

    async def create_store(self, body: Mapping[str, Any], caller: CallerContext) -> dict[str, Any]:
        name = body.get("name")
        if not isinstance(name, str) or not 3 <= len(name) <= 64:
            raise validation("invalid CreateStoreRequest.Name: value length must be 3..64")
        info = await self._registry().create(new_model_id(time.time()), name)
        await self.fga._audit(caller, "openfga.store_created", "fga_store", info.id)
        return _store_json(info)

    async def list_stores(self, query: Mapping[str, Any]) -> dict[str, Any]:
        size, token = page_size(query.get("page_size")), _token(query.get("continuation_token"))
        try:
            page = await self._registry().list_stores(size, token, str(query.get("name") or ""))
        except ValueError:
            raise _bad_token() from None
        return {
            "stores": [_store_json(s) for s in page.items],
            "continuation_token": page.continuation_token,
        }

    async def get_store(self, store_id: str) -> dict[str, Any]:
        info = await self._registry().get(store_id)
        if info is None:
            raise OpenFgaError(404, "store_id_not_found", "store_id_not_found")
        return _store_json(info)

    async def delete_store(self, store_id: str, caller: CallerContext) -> None:
        await self._store(store_id)
        if store_id == DEFAULT_FGA_STORE:
            raise validation("the default store (the one check_permissions uses) is permanent")
        await self._registry().delete(store_id)
        self._engines.pop(store_id, None)
        await self.fga._audit(caller, "openfga.store_deleted", "fga_store", store_id)

    # -- authorization models --------------------------------------------------------------

    async def write_model(
        self, store_id: str, body: Mapping[str, Any], caller: CallerContext
    ) -> dict[str, Any]:
        store, engine = await self._store(store_id)
        try:
            model = model_from_json(body)
            check_model(model)
            dsl = print_model(model)
        except FgaError as exc:
            raise OpenFgaError(400, exc.fga_code.name.lower(), exc.message) from None
        except (ModelFormatError, UnsupportedDslError) as exc:
            raise OpenFgaError(400, "invalid_authorization_model", str(exc)) from None
        stored = StoredModel(new_model_id(time.time()), dsl)
        await store.write_model(stored)
        await engine.fresh()
        await self.fga._audit(
            caller, "openfga.model_written", "fga_model", stored.id, store_id=store_id
        )
        return {"authorization_model_id": stored.id}

    async def read_models(self, store_id: str, query: Mapping[str, Any]) -> dict[str, Any]:
        await self._store(store_id)
        size, token = page_size(query.get("page_size")), _token(query.get("continuation_token"))
        try:
            page = await self._registry().models(store_id, size, token)
        except ValueError:
            raise _bad_token() from None
        return {
            "authorization_models": [_model_json(m.id, m.dsl) for m in page.items],
            "continuation_token": page.continuation_token,
        }

    async def read_model(self, store_id: str, model_id: str) -> dict[str, Any]:
        await self._store(store_id)
        version = await self._registry().model(store_id, model_id)
        if version is None:
            raise OpenFgaError(
                400, "authorization_model_not_found", f"Authorization Model '{model_id}' not found"
            )
        return {"authorization_model": _model_json(version.id, version.dsl)}

    # -- tuples ----------------------------------------------------------------------------

    async def write(
        self, store_id: str, body: Mapping[str, Any], caller: CallerContext
    ) -> dict[str, Any]:
        """All or nothing; existing writes or missing deletes fail unless told to ignore."""
        store, engine = await self._store(store_id)
        writes_raw = body.get("writes") or {}
        deletes_raw = body.get("deletes") or {}
        if not isinstance(writes_raw, Mapping) or not isinstance(deletes_raw, Mapping):
            raise validation("writes and deletes must be objects")
        writes = tuple_keys(writes_raw, "writes")
        # a delete names a tuple by its key alone (OpenFGA's TupleKeyWithoutCondition)
        named = tuple_keys(deletes_raw, "deletes")
        deletes = [TupleKey(k.object, k.relation, k.user) for k in named]
        if not writes and not deletes:
            raise OpenFgaError(
                400,
                "invalid_write_input",
                "Invalid input. Make sure you provide at least one write or delete",
            )
        if len(writes) + len(deletes) > MAX_TUPLES_PER_WRITE:
            raise OpenFgaError(
                400,
                "exceeded_entity_limit",
                f"The number of write operations exceeds the allowed limit of "
                f"{MAX_TUPLES_PER_WRITE}",
            )
        seen: set[str] = set()
        for key in [*writes, *deletes]:
            plain = f"{key.object}#{key.relation}@{key.user}"
            if plain in seen:
                raise OpenFgaError(
                    400,
                    "cannot_allow_duplicate_tuples_into_write_request",
                    f"duplicate tuple in write: user: '{key.user}', relation: "
                    f"'{key.relation}', object: '{key.object}'",
                )
            seen.add(plain)
        # A write is validated against the primary's model, never a lagging replica's.
        model_id = str(body.get("authorization_model_id") or "")
        model = await self._model(store_id, engine, model_id, consistent=True)
        for key in writes:
            problem = _write_problem(model, key)
            if problem is not None:
                raise validation(f"Invalid tuple '{key}'. Reason: {problem}")
        options = WriteOptions(
            ignore_existing=_option(writes_raw, "on_duplicate", "error"),
            ignore_missing=_option(deletes_raw, "on_missing", "error"),
        )
        try:
            await store.write_tuples(writes, deletes, options)
        except TupleConflict as conflict:
            k = conflict.key
            what = (
                "cannot write a tuple which already exists"
                if conflict.exists
                else "cannot delete a tuple which does not exist"
            )
            raise OpenFgaError(
                400,
                "write_failed_due_to_invalid_input",
                f"{what}: user: '{k.user}', relation: '{k.relation}', object: '{k.object}': "
                "invalid write input",
            ) from None
        await self.fga._audit(
            caller,
            "openfga.tuples_written",
            "fga_store",
            store_id,
            writes=len(writes),
            deletes=len(deletes),
        )
        return {}

    async def read(self, store_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        store, _ = await self._store(store_id)
        raw = body.get("tuple_key")
        key = tuple_key(raw, parts=()) if raw is not None else None
        if key is not None and not key.object and (key.user or key.relation):
            raise validation("the 'object' field must be of the form type: or type:id")
        where = TupleFilter() if key is None else TupleFilter(key.user, key.relation, key.object)
        size = page_size(body.get("page_size"))
        try:
            page = await store.read_tuples(where, size, _token(body.get("continuation_token")))
        except ValueError:
            raise _bad_token() from None
        written = list(page.written_at) or [0] * len(page.tuples)
        return {
            "tuples": [
                {"key": tuple_json(k), "timestamp": rfc3339(t)}
                for k, t in zip(page.tuples, written, strict=True)
            ],
            "continuation_token": page.continuation_token,
        }

    async def read_changes(self, store_id: str, query: Mapping[str, Any]) -> dict[str, Any]:
        await self._store(store_id)
        size, token = page_size(query.get("page_size")), _token(query.get("continuation_token"))
        object_type = str(query.get("type") or "")
        try:
            page = await self._registry().changes(store_id, object_type, size, token)
        except ValueError:
            raise _bad_token() from None
        return {
            "changes": [
                {
                    "tuple_key": tuple_json(c.key),
                    "operation": _OPERATIONS[c.operation],
                    "timestamp": rfc3339(c.created_at),
                }
                for c in page.items
                if c.key is not None
            ],
            "continuation_token": page.continuation_token,
        }

    # -- assertions ------------------------------------------------------------------------

    async def write_assertions(
        self, store_id: str, model_id: str, body: Mapping[str, Any], caller: CallerContext
    ) -> dict[str, Any]:
        await self.read_model(store_id, model_id)
        assertions = body.get("assertions") or []
        if not isinstance(assertions, list):
            raise validation("assertions must be a list")
        for item in assertions:
            if not isinstance(item, Mapping) or not isinstance(item.get("expectation"), bool):
                raise validation("each assertion needs tuple_key and expectation")
            tuple_key(item.get("tuple_key"))
        await self._registry().write_assertions(store_id, model_id, assertions)
        await self.fga._audit(
            caller, "openfga.assertions_written", "fga_model", model_id, store_id=store_id
        )
        return {}

    async def read_assertions(self, store_id: str, model_id: str) -> dict[str, Any]:
        await self.read_model(store_id, model_id)
        assertions = await self._registry().assertions(store_id, model_id)
        return {"authorization_model_id": model_id, "assertions": assertions}
