"""A request's deadline never hides a write (issue 36, item 10), on every database: a
transaction in flight when the deadline passes is waited for; one that wrote and
committed is answered (the deadline is lifted), one that only read still ends the
request at the deadline, with nothing written."""

from __future__ import annotations

import time
import uuid

import sqlalchemy as sa
import trio
import trio.lowlevel

from bastion.storage.deadline import RequestDeadline
from bastion.storage.sql import Database
from bastion.storage.sql.schema import users
from tests.storage.test_database import count_email, user_row

#: the request's deadline; every transaction below outlasts it
DEADLINE = 0.1
SLOW = 0.6


def slowly(conn: sa.Connection) -> None:
    """Take longer than the deadline inside the transaction, on the database's side
    where it can (where the old deadline sent its cancel)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_sleep({SLOW})")
    elif conn.dialect.name == "mysql":
        conn.exec_driver_sql(f"SELECT SLEEP({SLOW})")
    else:
        time.sleep(SLOW)


async def test_a_write_committing_after_the_deadline_is_answered(database: Database) -> None:
    email = f"{uuid.uuid4().hex}@example.com"

    def write(conn: sa.Connection) -> None:
        slowly(conn)
        conn.execute(sa.insert(users).values(user_row(email)))

    answered = False
    with RequestDeadline(DEADLINE) as scope:
        await database.run(write, write=True)
        await trio.lowlevel.checkpoint()  # a checkpoint past the deadline
        answered = True
    assert answered
    assert not scope.cancelled_caught
    assert await database.run(lambda conn: count_email(conn, email)) == 1


async def test_after_a_commit_the_rest_of_the_request_is_answered(database: Database) -> None:
    email = f"{uuid.uuid4().hex}@example.com"
    answered = False
    with RequestDeadline(DEADLINE) as scope:
        await database.run(lambda conn: conn.execute(sa.insert(users).values(user_row(email))))
        await trio.sleep(DEADLINE * 3)  # the rest of the work outlasts the deadline
        answered = True
    assert answered
    assert not scope.cancelled_caught


async def test_a_read_in_flight_at_the_deadline_still_ends_the_request(
    database: Database,
) -> None:
    reached = False
    with RequestDeadline(DEADLINE) as scope:
        await database.run(slowly)
        await trio.lowlevel.checkpoint()
        reached = True
    assert scope.cancelled_caught
    assert not reached


async def test_a_write_rolled_back_after_the_deadline_writes_nothing(database: Database) -> None:
    email = f"{uuid.uuid4().hex}@example.com"

    def refused(conn: sa.Connection) -> None:
        conn.execute(sa.insert(users).values(user_row(email)))
        slowly(conn)
        raise LookupError("refused after writing")

    with RequestDeadline(DEADLINE) as scope:
        try:
            await database.run(refused, write=True)
        except LookupError:
            await trio.lowlevel.checkpoint()  # the request goes on to answer the refusal: cancelled
    assert scope.cancelled_caught
    assert await database.run(lambda conn: count_email(conn, email)) == 0
