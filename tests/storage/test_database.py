"""The transaction runner on every database: atomicity, per-identity locks, ping."""

from __future__ import annotations

import uuid
from functools import partial

import pytest
import sqlalchemy as sa
import trio

from bastion.storage import StorageConfig
from bastion.storage.sql import Database
from bastion.storage.sql.commit_topics import notify_on_commit
from bastion.storage.sql.schema import users


def user_row(email: str) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "email": email,
        "signup_methods": "basic_auth",
        "roles": "user",
        "created_at": 1,
        "updated_at": 1,
    }


def count_email(conn: sa.Connection, email: str) -> int:
    return conn.execute(
        sa.select(sa.func.count()).select_from(users).where(users.c.email == email)
    ).scalar_one()


def pause(conn: sa.Connection) -> None:
    """Widen the window between check and insert, so a missing lock shows as a duplicate."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SELECT pg_sleep(0.01)")
    elif conn.dialect.name == "mysql":
        conn.exec_driver_sql("SELECT SLEEP(0.01)")


class Boom(Exception):
    pass


async def test_run_commits_and_returns(database: Database) -> None:
    email = f"{uuid.uuid4().hex}@example.com"
    row = user_row(email)
    await database.run(lambda conn: conn.execute(sa.insert(users).values(row)), write=True)
    got = await database.run(
        lambda conn: conn.execute(sa.select(users.c.id).where(users.c.email == email)).scalar()
    )
    assert got == row["id"]


async def test_failed_transaction_leaves_no_row(database: Database) -> None:
    email = f"{uuid.uuid4().hex}@example.com"

    def insert_then_fail(conn: sa.Connection) -> None:
        conn.execute(sa.insert(users).values(user_row(email)))
        assert count_email(conn, email) == 1  # visible inside the transaction
        raise Boom

    with pytest.raises(Boom):
        await database.run(insert_then_fail, write=True)
    with pytest.raises(Boom):
        await database.run_locked(f"email:{email}", insert_then_fail)
    assert await database.run(lambda conn: count_email(conn, email)) == 0


async def test_run_locked_keeps_one_identity_unique(database: Database) -> None:
    """20 concurrent check-then-insert of one email: exactly one row (no unique index)."""
    email = f"{uuid.uuid4().hex}@example.com"

    def signup(conn: sa.Connection) -> bool:
        if count_email(conn, email) > 0:
            return False
        pause(conn)
        conn.execute(sa.insert(users).values(user_row(email)))
        return True

    results: list[bool] = []

    async def attempt() -> None:
        results.append(await database.run_locked(f"identity:{email}", signup))

    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(attempt)
    assert sorted(results) == [False] * 19 + [True]
    assert await database.run(lambda conn: count_email(conn, email)) == 1


async def test_run_locked_with_several_keys_keeps_each_identity_unique(
    database: Database,
) -> None:
    """20 concurrent inserts, each of its own email and one shared phone number, each
    holding both identity locks (named in either order): exactly one gets the number."""
    phone = f"+1555{uuid.uuid4().int % 10**7:07d}"

    def signup(email: str, conn: sa.Connection) -> bool:
        taken = conn.execute(
            sa.select(sa.func.count()).select_from(users).where(users.c.phone_number == phone)
        ).scalar_one()
        if taken:
            return False
        pause(conn)
        conn.execute(sa.insert(users).values({**user_row(email), "phone_number": phone}))
        return True

    results: list[bool] = []

    async def attempt(n: int) -> None:
        email = f"{uuid.uuid4().hex}@example.com"
        keys = [f"email:{email}", f"phone:{phone}"]
        if n % 2:
            keys.reverse()  # one global order inside: no deadlock either way round
        results.append(await database.run_locked(keys, partial(signup, email)))

    async with trio.open_nursery() as nursery:
        for n in range(20):
            nursery.start_soon(attempt, n)
    assert sorted(results) == [False] * 19 + [True]


async def test_ping_and_dialect(database: Database, database_kind: str) -> None:
    await database.ping()
    expected = {
        "sqlite": "sqlite",
        "postgres": "postgresql",
        "postgres-asyncpg": "postgresql",
        "mariadb": "mysql",
    }
    assert database.dialect == expected[database_kind]


async def test_read_sees_committed_rows_and_returns(database: Database) -> None:
    email = f"{uuid.uuid4().hex}@example.com"
    row = user_row(email)
    await database.run(lambda conn: conn.execute(sa.insert(users).values(row)), write=True)
    assert await database.read(lambda conn: count_email(conn, email)) == 1
    # A failing read raises as it is, and the pooled connection stays usable.
    with pytest.raises(sa.exc.DBAPIError):
        await database.read(lambda conn: conn.exec_driver_sql("SELECT * FROM no_such_table"))
    assert await database.read(lambda conn: count_email(conn, email)) == 1
    # And a transaction after a read on the same pool still is one: rolled back on error.
    other = f"{uuid.uuid4().hex}@example.com"

    def insert_then_fail(conn: sa.Connection) -> None:
        conn.execute(sa.insert(users).values(user_row(other)))
        raise Boom

    with pytest.raises(Boom):
        await database.run(insert_then_fail, write=True)
    assert await database.read(lambda conn: count_email(conn, other)) == 0


def two_ids(conn: sa.Connection) -> tuple[int, int]:
    first = conn.exec_driver_sql("SELECT txid_current()").scalar_one()
    return first, conn.exec_driver_sql("SELECT txid_current()").scalar_one()


@pytest.mark.parametrize("database_kind", ["postgres", "postgres-asyncpg"])
async def test_read_and_write_one_on_postgres_open_no_transaction(database: Database) -> None:
    """Each statement of a read or a write_one is its own transaction on PostgreSQL (no
    BEGIN/COMMIT), and the pooled connection is back in a transaction for the next run."""
    first, second = await database.read(two_ids)
    assert first != second
    first, second = await database.write_one(two_ids)
    assert first != second
    first, second = await database.run(two_ids)
    assert first == second


async def test_write_one_commits_and_notifies(database: Database) -> None:
    email = f"{uuid.uuid4().hex}@example.com"
    row = user_row(email)
    woken: list[str] = []
    database.on_commit("users", lambda: woken.append("users"))

    def insert(conn: sa.Connection) -> None:
        conn.execute(sa.insert(users).values(row))
        notify_on_commit(conn, "users")

    await database.write_one(insert)
    assert woken == ["users"]
    assert await database.read(lambda conn: count_email(conn, email)) == 1
    # A statement that fails writes nothing and leaves the pool usable.
    with pytest.raises(sa.exc.IntegrityError):
        await database.write_one(lambda conn: conn.execute(sa.insert(users).values(row)))
    assert woken == ["users"]
    assert await database.read(lambda conn: count_email(conn, email)) == 1


@pytest.mark.parametrize("database_kind", ["postgres", "postgres-asyncpg"])
async def test_postgres_sessions_are_bounded_and_never_jit_compile_or_run_in_parallel(
    database: Database, database_config: StorageConfig
) -> None:
    """Each session, through either driver, bounds statements and lock waits by the
    timeout and has JIT and parallel query off (compiling a batch of the engine's reads
    cost seconds; starting parallel workers for one cost more than they saved)."""

    def settings(conn: sa.Connection) -> dict[str, str]:
        rows = conn.exec_driver_sql(
            "SELECT name, setting FROM pg_settings"
            " WHERE name IN ('jit', 'max_parallel_workers_per_gather', 'statement_timeout',"
            " 'lock_timeout')"
        )
        return {name: setting for name, setting in rows}

    bound = str(round(database_config.timeout * 1000))  # pg_settings counts milliseconds
    assert await database.run(settings) == {
        "jit": "off",
        "max_parallel_workers_per_gather": "0",
        "statement_timeout": bound,
        "lock_timeout": bound,
    }
