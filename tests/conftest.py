"""What every test session shares: the databases it made are dropped when it ends, so a
run leaves nothing behind on the PostgreSQL and MariaDB servers it used; the test
modules are collected with the cyclic collector off (as the server imports: see
``bastion.cli.collector_paused``), and what collection built is kept out of later full
collections."""

from __future__ import annotations

import gc
from collections.abc import Generator

import pytest

from tests.dbfixtures import drop_made_databases


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.enable()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    drop_made_databases()
