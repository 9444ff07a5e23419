"""What every test session shares: the databases it made are dropped when it ends, so a
run leaves nothing behind on the PostgreSQL and MariaDB servers it used."""

from __future__ import annotations

import pytest

from tests.dbfixtures import drop_made_databases


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    drop_made_databases()
