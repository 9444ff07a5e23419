"""``bastion import authorizer``, ``bastion import users`` and ``bastion export users``:
moving users in and out with their password hashes (README "Moving from Authorizer",
"Importing users").

Each takes bastion's database flags as ``bastion migrate`` does, refuses a schema behind this
build (run ``bastion migrate`` first), prints a summary of what was imported, updated, left
unchanged and skipped (with the reason of each skipped row) on standard output, and a
progress line on long runs on standard error. ``--dry-run`` decides everything and writes
nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import IO

import trio

from bastion.core.settings import ConfigError
from bastion.database_command import CommandFlag, DatabaseCommand, Invocation
from bastion.moving.authorizer_fga import MODEL, OpenFgaTables, import_fga
from bastion.moving.authorizer_import import import_authorizer
from bastion.moving.authorizer_source import open_source
from bastion.moving.records import FirebaseParameters, RecordRules
from bastion.moving.users_file import export_users, import_users
from bastion.moving.writer import ImportRun
from bastion.progress import Progress
from bastion.service.fga.opening import open_fga_store
from bastion.service.hash_formats import UnusableHash
from bastion.service.secretbox import SecretBox
from bastion.service.system import SystemRandom
from bastion.storage import SchemaMismatch, Storage, StorageUnavailable, open_storage
from bastion.storage.fga_stores import SqlFgaStores

__all__ = ["COMMANDS", "run_command"]

_DRY_RUN = CommandFlag("dry-run", "Decide every row as a real run would; write nothing.")

IMPORT_AUTHORIZER = DatabaseCommand(
    words=("import", "authorizer"),
    summary=(
        "Imports an Authorizer 2.x database: users with their ids and bcrypt hashes, "
        "webhooks and their logs, email templates, audit logs and authenticator apps. A "
        "second run changes nothing; a row changed in Authorizer since updates."
    ),
    flags=(
        CommandFlag("from-database-type", "Authorizer's --database-type.", "TYPE"),
        CommandFlag(
            "from-database-url",
            "Authorizer's --database-url (a PostgreSQL URL, a SQLite file, or a MySQL DSN).",
            "URL",
        ),
        CommandFlag(
            "from-fga-store-name",
            "The OpenFGA store of Authorizer's embedded engine, by name (Authorizer's "
            "--organization-name), when its database holds several.",
            "NAME",
        ),
        CommandFlag(
            "from-jwt-secret",
            "Authorizer's --jwt-secret: Authorizer 2.3 seals authenticator apps' secrets "
            "with a key derived from it. Without it those authenticators are skipped.",
            "SECRET",
        ),
        _DRY_RUN,
    ),
    server_flags=("client-secret", "roles", "default-roles", "fga-store", "fga-store-url"),
)
IMPORT_USERS = DatabaseCommand(
    words=("import", "users"),
    summary=(
        "Imports users from JSON lines (one user a line; README 'Importing users' lists the "
        "fields and password hash formats). A bad line is reported with its number and "
        "skipped."
    ),
    flags=(
        _DRY_RUN,
        CommandFlag("firebase-signer-key", "A Firebase project's base64 signer key.", "KEY"),
        CommandFlag("firebase-salt-separator", "Its base64 salt separator.", "SEPARATOR"),
        CommandFlag("firebase-rounds", "Its rounds.", "N"),
        CommandFlag("firebase-mem-cost", "Its mem_cost.", "N"),
    ),
    arguments=("FILE",),
    server_flags=("roles", "default-roles"),
)
EXPORT_USERS = DatabaseCommand(
    words=("export", "users"),
    summary="Writes every user as JSON lines, password hashes included (- for stdout).",
    arguments=("FILE",),
)
COMMANDS = {c.words: c for c in (IMPORT_AUTHORIZER, IMPORT_USERS, EXPORT_USERS)}


def run_command(command: DatabaseCommand, invocation: Invocation) -> int:
    """Exit status: 0 done (the summary names any row skipped), 1 storage failed, 2 refused."""
    name = "bastion " + " ".join(command.words)
    try:
        with ExitStack() as files:
            work = _work(command, invocation, files)
            said = trio.run(_with_database, invocation, work)
        if said:  # an export to standard output says nothing more there
            print(said)
    except ConfigError as exc:
        print(f"{name}: {exc.message}", file=sys.stderr)
        return 2
    except (StorageUnavailable, SchemaMismatch, ValueError, OSError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    return 0


Work = Callable[[Storage], Awaitable[str]]


async def _with_database(invocation: Invocation, work: Work) -> str:
    """``work`` on bastion's storage; a schema behind this build is refused (migrate first)."""
    async with open_storage(replace(invocation.storage, check_schema=True)) as storage:
        return await work(storage)


def _work(command: DatabaseCommand, invocation: Invocation, files: ExitStack) -> Work:
    """What the command does once the database is open; ``files`` holds what it opened."""
    options, dry_run = invocation.options, "dry-run" in invocation.options
    rules = _rules(invocation)
    path = invocation.arguments[0] if invocation.arguments else ""
    if command is EXPORT_USERS:
        out = sys.stdout if path == "-" else files.enter_context(_open(path, "w"))
        return partial(_export, out, path != "-")
    if command is IMPORT_USERS:
        lines = sys.stdin if path == "-" else files.enter_context(_open(path, "r"))
        return partial(_import_users, lines, rules, dry_run)
    source_type, source_url = options.get("from-database-type"), options.get("from-database-url")
    if not source_type or not source_url:
        raise ConfigError("give --from-database-type and --from-database-url (Authorizer's)")
    secret = invocation.settings.client_secret
    box = SecretBox(secret, SystemRandom()) if secret else None
    return partial(
        _import_authorizer, invocation, source_type, source_url, rules, box,
    )  # fmt: skip


async def _import_users(lines: IO[str], rules: RecordRules, dry_run: bool, storage: Storage) -> str:
    run = ImportRun(storage.db, dry_run=dry_run, progress=Progress("import users"))
    await import_users(run, lines, rules=rules)
    return _report(run)


async def _export(out: IO[str], to_file: bool, storage: Storage) -> str:
    written = await export_users(storage.db, out, progress=Progress("export users"))
    return f"exported {written:,} users" if to_file else ""


async def _import_authorizer(
    invocation: Invocation, source_type: str, source_url: str, rules: RecordRules,
    box: SecretBox | None, storage: Storage,
) -> str:  # fmt: skip
    options = invocation.options
    run = ImportRun(
        storage.db, dry_run="dry-run" in options, progress=Progress("import authorizer")
    )
    with open_source(source_type, source_url) as source:
        await import_authorizer(
            run, source, rules=rules, from_jwt_secret=options.get("from-jwt-secret"), box=box
        )
        if source.openfga_tables:
            async with open_fga_store(invocation.settings, storage) as stores:
                if isinstance(stores, SqlFgaStores):
                    tables = await trio.to_thread.run_sync(OpenFgaTables, source.engine)
                    store_name = options.get("from-fga-store-name")
                    await import_fga(run, tables, stores, store_name=store_name)
                else:
                    run.tally.skip_all(
                        MODEL, 1, "bastion's engine keeps no store in a database (--fga-store)"
                    )
    return _report(run)


def _open(path: str, mode: str) -> IO[str]:
    """A file the command reads or writes (closed by the caller's ExitStack)."""
    return Path(path).open(mode, encoding="utf-8")


def _report(run: ImportRun) -> str:
    head = "dry run: nothing was written; a real run would do this\n" if run.dry_run else ""
    return head + run.tally.summary()


def _rules(invocation: Invocation) -> RecordRules:
    """The server's roles (its flags, when given) and Firebase's parameters."""

    settings = invocation.settings
    return RecordRules(
        now=int(time.time()),
        default_roles=settings.default_roles,
        # checked only when given: an import with database flags alone takes any role
        allowed_roles=settings.roles if "roles" in invocation.given else (),
        firebase=_firebase(invocation.options),
    )


def _firebase(options: dict[str, str]) -> FirebaseParameters | None:
    names = ("firebase-signer-key", "firebase-salt-separator", "firebase-rounds",
             "firebase-mem-cost")  # fmt: skip
    given = [name for name in names if name in options]
    if not given:
        return None
    if len(given) != len(names):
        missing = ", ".join(f"--{n}" for n in names if n not in options)
        raise ConfigError(f"a Firebase import needs every hash parameter; missing {missing}")
    try:
        return FirebaseParameters(
            signer_key=options["firebase-signer-key"],
            salt_separator=options["firebase-salt-separator"],
            rounds=int(options["firebase-rounds"]),
            mem_cost=int(options["firebase-mem-cost"]),
        )
    except (ValueError, UnusableHash):
        raise ConfigError("--firebase-rounds and --firebase-mem-cost are whole numbers") from None
