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
import sys
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AsyncExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import IO, TextIO

import trio

from bastion.core.fga.tuples import TupleKey
from bastion.database_command import CommandFlag, DatabaseCommand, Invocation
from bastion.fga_files import TupleFileError, TupleWriter, format_of, read_rows
from bastion.fga_import_parallel import PARALLEL_FROM, copy_texts, worker_count
from bastion.fga_tuple_check import BATCH, MAX_PROBLEMS, BadTuples, checked_batches
from bastion.progress import Progress
from bastion.service.fga.engine import ActiveModel
from bastion.service.fga.opening import open_fga_store
from bastion.storage import SchemaMismatch, StorageUnavailable, open_storage
from bastion.storage.fga import StoredModel
from bastion.storage.fga_bulk import ImportConflict, ModelChanged, export_tuples, import_tuples
from bastion.storage.fga_bulk_postgres import Batch, CopyText
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
        stream = stack.enter_context(_open_input(path))
        progress = Progress("fga import")
        stored = StoredModel(version.id, version.dsl)
        try:
            batches = _batches(stream, file_format, stored, path, stores.db.dialect)
            report = await import_tuples(stores, store_id, batches, stored.id, progress=progress)
        except TupleFileError as exc:
            raise Refused(f"{path}: {exc}") from None
        except BadTuples as bad:
            first = len(bad.problems) >= MAX_PROBLEMS
            more = " (the first ones; there may be more)" if first else ""
            raise Refused(*bad.problems, f"nothing was imported{more}") from None
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


def _batches(
    stream: IO[str], file_format: str, model: StoredModel, path: str, dialect: str
) -> Iterable[Batch | CopyText]:
    """The file's good tuples; a large CSV file into PostgreSQL is read by worker
    processes (:mod:`bastion.fga_import_parallel`)."""
    if file_format == "csv" and dialect == "postgresql" and _size(stream) >= PARALLEL_FROM:
        return copy_texts(stream, model, path, worker_count())
    return checked_batches(read_rows(stream, file_format), ActiveModel.load(model), path)


def _size(stream: IO[str]) -> int:
    try:
        return os.fstat(stream.fileno()).st_size
    except (OSError, ValueError):  # not a file (a pipe's size says nothing either)
        return 0


def _open_input(path: str) -> IO[str]:
    if path == "-":
        return sys.stdin
    try:
        return open(path, encoding="utf-8", newline="")
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror}") from None


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
