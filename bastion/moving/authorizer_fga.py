"""Authorizer's fine-grained authorization: the store its embedded OpenFGA kept in the same
database (OpenFGA's own tables ``store``, ``authorization_model``, ``tuple``), moved into
bastion's default store (the one the Authorizer-shaped API and ``check_permissions`` use).

- The model: the store's newest (its id, a ULID, kept), read from OpenFGA's protobuf
  (:mod:`bastion.moving.openfga_wire`) and written as bastion's DSL. It is written when
  bastion's store has no model or an older one (ULIDs sort by time); a model of bastion's
  own written since is left in place and named.
- The tuples: validated against that model and loaded as ``bastion fga import`` loads them
  (:mod:`bastion.storage.fga_bulk`: one transaction, duplicates skipped, announced to
  running servers). A store with a model of its own keeps its tuples too: the import adds
  Authorizer's and never removes one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
import trio

from bastion.core.fga.dsl_printer import print_model
from bastion.core.fga.model import model_from_json
from bastion.core.fga.tuples import TupleKey
from bastion.fga_tuple_check import Validator
from bastion.moving.openfga_wire import decode_context, decode_model, decode_type_definition
from bastion.moving.writer import IMPORTED, SKIPPED, UNCHANGED, UPDATED, ImportRun
from bastion.service.fga.engine import ActiveModel
from bastion.storage.fga import StoredModel
from bastion.storage.fga_bulk import ImportConflict, ModelChanged, import_tuples
from bastion.storage.fga_stores import DEFAULT_FGA_STORE, SqlFgaStores

__all__ = ["OpenFgaTables", "import_fga"]

MODEL, TUPLES = "authorization model", "authorization tuples"
_PAGE = 5_000


class OpenFgaTables:
    """OpenFGA's tables in an Authorizer database (blocking calls: run them in a thread)."""

    def __init__(self, engine: sa.Engine) -> None:
        self._engine = engine
        metadata = sa.MetaData()
        metadata.reflect(engine, only=["store", "authorization_model", "tuple"])
        self._store, self._models, self._tuples = (
            metadata.tables[name] for name in ("store", "authorization_model", "tuple")
        )

    def stores(self) -> list[tuple[str, str]]:
        """(id, name) of every store not deleted."""
        query = sa.select(self._store.c.id, self._store.c.name).where(
            self._store.c.deleted_at.is_(None)
        )
        with self._engine.connect() as conn:
            return [(row.id, row.name) for row in conn.execute(query.order_by(self._store.c.id))]

    def newest_model(self, store: str) -> dict[str, Any] | None:
        """The store's newest model in OpenFGA's JSON form (with its ``id``), or None."""
        models = self._models
        with self._engine.connect() as conn:
            newest = conn.execute(
                sa.select(sa.func.max(models.c.authorization_model_id)).where(
                    models.c.store == store
                )
            ).scalar_one()
            if newest is None:
                return None
            rows = (
                conn.execute(
                    sa.select(models).where(
                        models.c.store == store, models.c.authorization_model_id == newest
                    )
                )
                .mappings()
                .all()
            )
        whole = next((r["serialized_protobuf"] for r in rows if r.get("serialized_protobuf")), None)
        if whole is not None:
            model = decode_model(bytes(whole))
        else:  # a store from before OpenFGA kept the whole model: one row per type
            types = [decode_type_definition(bytes(r["type_definition"])) for r in rows]
            version = next((r.get("schema_version") for r in rows if r.get("schema_version")), None)
            model = {"schema_version": version or "1.0", "type_definitions": types}
        model["id"] = newest
        return model

    def tuples(self, store: str) -> Iterator[list[TupleKey]]:
        """The store's tuples, a page at a time, in OpenFGA's own order (its ulid)."""
        table, after = self._tuples, ""
        while True:
            query = (
                sa.select(table)
                .where(table.c.store == store, table.c.ulid > after)
                .order_by(table.c.ulid)
                .limit(_PAGE)
            )
            with self._engine.connect() as conn:
                rows = conn.execute(query).mappings().all()
            if not rows:
                return
            yield [_tuple(row) for row in rows]
            after = rows[-1]["ulid"]


def _tuple(row: Any) -> TupleKey:
    if "_user" in row:  # PostgreSQL and MySQL keep the user whole
        user = row["_user"]
    else:  # SQLite keeps its parts
        user = f"{row['user_object_type']}:{row['user_object_id']}"
        if row["user_relation"]:
            user += f"#{row['user_relation']}"
    raw = row.get("condition_context")
    return TupleKey(
        object=f"{row['object_type']}:{row['object_id']}",
        relation=row["relation"],
        user=user,
        condition=row.get("condition_name") or "",
        context=decode_context(bytes(raw) if raw else None),
    )


async def import_fga(
    run: ImportRun, tables: OpenFgaTables, stores: SqlFgaStores, *, store_name: str | None
) -> None:
    found = await trio.to_thread.run_sync(tables.stores)
    if store_name is not None:
        found = [(i, name) for i, name in found if name == store_name]
    if len(found) != 1:
        names = ", ".join(name for _, name in found) or "none"
        run.tally.add(MODEL, SKIPPED, "the store", f"{len(found)} OpenFGA stores ({names}): "
                      "name Authorizer's with --from-fga-store-name")  # fmt: skip
        return
    store_id = found[0][0]
    model = await trio.to_thread.run_sync(tables.newest_model, store_id)
    if model is None:
        run.tally.add(MODEL, SKIPPED, store_id, "Authorizer's store has no model")
        return
    active = await _model(run, stores, model)
    if active is None:
        return
    batches = _validated(tables.tuples(store_id), active, run, store_id)
    if run.dry_run:  # validated and counted; whether each is there already is not asked
        given = await trio.to_thread.run_sync(lambda: sum(len(batch) for batch in batches))
        run.tally.count(TUPLES, IMPORTED, given)
        return
    try:
        report = await import_tuples(stores, DEFAULT_FGA_STORE, batches, active.id)
    except (ImportConflict, ModelChanged) as exc:
        run.tally.add(TUPLES, SKIPPED, "all", f"nothing imported: {exc}")
        return
    run.tally.count(TUPLES, IMPORTED, report.written)
    run.tally.count(TUPLES, UNCHANGED, report.skipped)


async def _model(run: ImportRun, stores: SqlFgaStores, model: dict[str, Any]) -> ActiveModel | None:
    """bastion's model after the import (Authorizer's, or a newer one of bastion's own)."""
    dsl = print_model(model_from_json(model))
    page = await stores.models(DEFAULT_FGA_STORE, 1, "")
    current = page.items[0] if page.items else None
    if current is not None and current.id >= model["id"]:
        result, reason = (
            (UNCHANGED, "")
            if current.id == model["id"]
            else (SKIPPED, f"bastion's store has a newer model of its own ({current.id}); kept")
        )
        run.tally.add(MODEL, result, model["id"], reason)
        return ActiveModel.load(StoredModel(current.id, current.dsl))
    if not run.dry_run:
        await stores.store(DEFAULT_FGA_STORE).write_model(StoredModel(model["id"], dsl))
    run.tally.add(MODEL, IMPORTED if current is None else UPDATED, model["id"])
    return ActiveModel.load(StoredModel(model["id"], dsl))


def _validated(
    pages: Iterator[list[TupleKey]], model: ActiveModel, run: ImportRun, store_id: str
) -> Iterator[list[tuple[int, TupleKey]]]:
    """Batches of the tuples the model accepts (numbered in OpenFGA's order); the others
    are counted as skipped with the reason."""
    validator, number = Validator(model), 0
    for page in pages:
        batch = []
        for key in page:
            number += 1
            problem = validator.problem(key)
            if problem is None:
                batch.append((number, key))
            else:
                run.tally.add(TUPLES, SKIPPED, str(key), problem)
        yield batch
