"""The suite's own databases: named for the run, so two sessions on one server never meet,
and dropped when the session ends."""

from __future__ import annotations

import asyncio

import asyncpg
from sqlalchemy.engine import make_url

from tests.dbfixtures import drop_databases, fresh_postgres_url
from tests.services import PG_BASE, db_name, run_id


def test_names_carry_the_run_and_the_worker() -> None:
    name = db_name("x")
    assert name.startswith(f"bastion_{run_id()}_")
    assert name.endswith("_x")
    assert len(run_id()) == 8


def _exists(name: str) -> bool:
    admin = make_url(PG_BASE).set(database="postgres").render_as_string(hide_password=False)

    async def ask() -> bool:
        conn = await asyncpg.connect(admin)
        try:
            return bool(await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name))
        finally:
            await conn.close()

    return asyncio.run(ask())


def test_a_made_database_is_dropped() -> None:
    url = fresh_postgres_url("dropme")
    name = make_url(url).database
    assert name is not None
    assert _exists(name)
    drop_databases(postgres=[name])
    assert not _exists(name)
