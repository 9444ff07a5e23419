"""``bastion fga import`` and ``bastion fga export``: an authorization store's tuples in
bulk, in the files OpenFGA's CLI reads and writes (:mod:`bastion.fga_files`).

They open the database as ``bastion migrate`` does (:mod:`bastion.database_command`),
plus the flags that say where the engine's store is (``--fga-store``,
``--fga-store-url``), so that they find the very store the server uses; with Redis as the
memory store (``--memory-store-url``) an import is announced to running servers as any
write is. The load itself is :mod:`bastion.storage.fga_bulk`.

An import validates every tuple against the store's current model as the API does (the
same rules and messages), names each bad one with its line, and writes nothing unless all
are good; importing the same file again changes nothing.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import IO, TextIO

import trio

from bastion.core.fga.tuples import TupleKey
from bastion.database_command import CommandFlag, DatabaseCommand, Invocation
from bastion.fga_files import Row, TupleFileError, TupleWriter, format_of, read_rows
from bastion.progress import Progress
from bastion.service.fga.base import _write_problem
from bastion.service.fga.engine import ActiveModel
from bastion.service.fga.openfga_input import OpenFgaError, tuple_key
from bastion.service.fga.opening import open_fga_store
from bastion.storage import SchemaMismatch, StorageUnavailable, open_storage
from bastion.storage.fga import StoredModel
from bastion.storage.fga_bulk import ImportConflict, ModelChanged, export_tuples, import_tuples
from bastion.storage.fga_stores import DEFAULT_FGA_STORE, SqlFgaStores

__all__ = ["EXPORT", "IMPORT", "run_export", "run_import"]

_STORE = CommandFlag(
    "store",
    "The store's id (OpenFGA's store id); default: the default store, the one the "
    "Authorizer-shaped API and check_permissions use.",
    "ID",
)
_FORMAT = CommandFlag(
    "format",
    "csv, json, jsonl or yaml; default: the FILE's extension (.csv, .json, .jsonl, .yaml, .yml)",
    "FORMAT",
)
_STORE_FLAGS = ("fga-store", "fga-store-url")

IMPORT = DatabaseCommand(
    words=("fga", "import"),
    summary=(
        "Writes the tuples of FILE (- for standard input, with --format) into an "
        "authorization store in one transaction: validated against the store's current "
        "model, tuples already stored skipped, nothing written unless every tuple is "
        "good. FILE is in a format of OpenFGA's CLI (fga tuple write --file): CSV with the "
        "header user_type,user_id,user_relation,relation,object_type,object_id and "
        "optionally condition_name,condition_context; a JSON or YAML list of "
        "{user, relation, object, condition}; or JSON Lines. Running servers use the "
        "tuples from their next request on."
    ),
    flags=(_STORE, _FORMAT),
    arguments=("FILE",),
    server_flags=_STORE_FLAGS,
)

EXPORT = DatabaseCommand(
    words=("fga", "export"),
    summary=(
        "Writes every tuple of an authorization store, as of one moment, to FILE (or "
        "standard output) in a format that bastion fga import and OpenFGA's CLI "
        "(fga tuple write --file) read back."
    ),
    flags=(_STORE, _FORMAT),
    optional=("FILE",),
    server_flags=_STORE_FLAGS,
)

#: Tuples validated and sent to the database at a time.
BATCH = 5_000
#: Bad lines named before the import gives up reading.
MAX_PROBLEMS = 20


class Refused(Exception):
    """The command stops: one message per line, for standard error."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = lines


def run_import(invocation: Invocation) -> int:
    return _run("fga import", partial(_import, invocation), sys.stdout)


def run_export(invocation: Invocation) -> int:
    # Its standard output may be the tuples.
    return _run("fga export", partial(_export, invocation), sys.stderr)


def _run(command: str, work: Callable[[], Awaitable[str]], summary_to: TextIO) -> int:
    try:
        summary = trio.run(work)
    except Refused as refused:
        for line in refused.lines:
            print(f"bastion {command}: {line}", file=sys.stderr)
        return 1
    except (StorageUnavailable, SchemaMismatch) as exc:
        print(f"bastion {command}: {exc}", file=sys.stderr)
        return 1
    print(summary, file=summary_to)
    return 0


async def _open(invocation: Invocation, stack: AsyncExitStack) -> tuple[SqlFgaStores, str]:
    """The engine's stores where the server finds them, and the store asked for."""
    settings = invocation.settings
    if settings.fga_store in ("none", "memory"):
        raise Refused(
            f"--fga-store {settings.fga_store}: the server keeps no authorization store "
            "in a database, so there is none to import into or export from"
        )
    storage_config = invocation.storage
    if storage_config.database_url.startswith("postgresql+asyncpg://"):
        # COPY goes through psycopg; the database is the same.
        url = storage_config.database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
        storage_config = replace(storage_config, database_url=url)
    storage = await stack.enter_async_context(
        open_storage(replace(storage_config, check_schema=True))
    )
    stores = await stack.enter_async_context(open_fga_store(settings, storage))
    assert isinstance(stores, SqlFgaStores)
    store_id = invocation.options.get("store", DEFAULT_FGA_STORE)
    if await stores.get(store_id) is None:
        raise Refused(f"no authorization store {store_id!r} in this database")
    return stores, store_id


# ---------------------------------------------------------------- import


async def _import(invocation: Invocation) -> str:
    (path,) = invocation.arguments
    file_format = _format(path, invocation)
    async with AsyncExitStack() as stack:
        stores, store_id = await _open(invocation, stack)
        page = await stores.models(store_id, 1, "")
        if not page.items:
            raise Refused(f"store {store_id} has no authorization model: write one first")
        version = page.items[0]
        model = ActiveModel.load(StoredModel(version.id, version.dsl))
        stream = stack.enter_context(_open_input(path))
        progress = Progress("fga import")
        batches = _validated(read_rows(stream, file_format), model, path)
        try:
            report = await import_tuples(stores, store_id, batches, model.id, progress=progress)
        except TupleFileError as exc:
            raise Refused(f"{path}: {exc}") from None
        except ImportConflict as conflict:
            raise Refused(
                *(
                    f"{path}:{line}: {key} is stored (or given earlier in the file) with "
                    "another condition or context"
                    for line, key in conflict.conflicts
                ),
                "nothing was imported",
            ) from None
        except ModelChanged:
            raise Refused(
                "the store's authorization model changed during the import: nothing was "
                "imported; run it again to validate against the new model"
            ) from None
        finally:
            progress.done()
    return (
        f"imported {report.given:,} tuples from {path} into store {store_id}: "
        f"{report.written:,} written, {report.skipped:,} already there "
        f"(store revision {report.revision})"
    )


def _open_input(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    try:
        return open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror}") from None


#: An object or a user whose ids pass every rule of the ids themselves (no ``*``, ``:``,
#: ``#`` or blank in an id): whether it is good then depends on its shape alone.
_PLAIN_OBJECT = re.compile(r"[\w-]+:[\w|@.+/-]+")
_PLAIN_USER = re.compile(r"[\w-]+:[\w|@.+/-]+(?:#[\w-]+)?")


class Validator:
    """The API's rule for a tuple (``_write_problem``), asked once per *shape* (object
    type, relation, user type and relation, condition) for the tuples whose ids are
    plain and carry no context: a file of millions of tuples has a handful of shapes.
    Anything else, and every tuple with a problem, gets the rule itself."""

    def __init__(self, model: ActiveModel) -> None:
        self._model = model
        self._good: set[tuple[str, ...]] = set()

    def problem(self, key: TupleKey) -> str | None:
        plain = (
            not key.context
            and _PLAIN_OBJECT.fullmatch(key.object) is not None
            and _PLAIN_USER.fullmatch(key.user) is not None
            and key.user != f"{key.object}#{key.relation}"
        )
        if not plain:
            return _write_problem(self._model, key)
        user_object, _, user_relation = key.user.partition("#")
        shape = (
            key.object.partition(":")[0],
            key.relation,
            user_object.partition(":")[0],
            user_relation,
            key.condition,
        )
        if shape in self._good:
            return None
        problem = _write_problem(self._model, key)
        if problem is None:
            self._good.add(shape)
        return problem


def _validated(
    rows: Iterator[Row], model: ActiveModel, path: str
) -> Iterator[list[tuple[int, TupleKey]]]:
    """Batches of good tuples while every row so far is good; once one is not, the rest
    of the file is only checked (up to :data:`MAX_PROBLEMS`) and :class:`Refused` raised."""
    validator = Validator(model)
    problems: list[str] = []
    batch: list[tuple[int, TupleKey]] = []
    for row in rows:
        problem = row.problem
        key = row.key
        if key is not None:
            problem = validator.problem(key) or ""
        elif not problem:
            try:
                key = tuple_key(row.fields)
            except OpenFgaError as exc:
                problem = exc.message
            else:
                problem = validator.problem(key) or ""
        if problem:
            problems.append(f"{path}:{row.line}: {problem}")
            if len(problems) >= MAX_PROBLEMS:
                break
            continue
        if problems or key is None:
            continue
        batch.append((row.line, key))
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if problems:
        more = " (the first ones; there may be more)" if len(problems) >= MAX_PROBLEMS else ""
        raise Refused(*problems, f"nothing was imported{more}")
    if batch:
        yield batch


# ---------------------------------------------------------------- export


async def _export(invocation: Invocation) -> str:
    path = invocation.arguments[0] if invocation.arguments else "-"
    file_format = _format(path, invocation, default="csv")
    async with AsyncExitStack() as stack:
        stores, store_id = await _open(invocation, stack)
        target = Path(path)
        partial_file = target.with_name(f".{target.name}.partial") if path != "-" else None
        try:
            out = (
                sys.stdout
                if partial_file is None
                else stack.enter_context(partial_file.open("w", encoding="utf-8", newline=""))
            )
        except OSError as exc:
            raise Refused(f"cannot write {path}: {exc.strerror}") from None
        writer = TupleWriter(out, file_format)
        progress = Progress("fga export")

        def write(key: TupleKey) -> None:
            writer.write(key)
            if writer.count % BATCH == 0:
                progress(writer.count)

        try:
            count, revision = await export_tuples(stores, store_id, write)
            writer.close()
            out.flush()
        except BaseException:
            if partial_file is not None:
                partial_file.unlink(missing_ok=True)
            raise
        finally:
            progress.done()
        if partial_file is not None:
            out.close()
            os.replace(partial_file, target)
    return f"exported {count:,} tuples of store {store_id} (store revision {revision}) to {path}"


def _format(path: str, invocation: Invocation, default: str = "") -> str:
    given = invocation.options.get("format", "")
    try:
        return format_of(path, given or (default if path == "-" else ""))
    except TupleFileError as exc:
        raise Refused(str(exc)) from None
