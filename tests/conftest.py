"""What every test session shares: the databases it made are dropped when it ends, so a
run leaves nothing behind on the PostgreSQL and MariaDB servers it used; the test
modules are collected with the cyclic collector off (as the server imports: see
``bastion.cli.collector_paused``), and what collection built is kept out of later full
collections."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from bastion.cli import collector_paused
from tests.dbfixtures import drop_made_databases


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Generator[None, object, object]:
    with collector_paused():
        return (yield)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    drop_made_databases()
