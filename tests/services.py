"""Where the test suite finds the real services, isolated per pytest-xdist worker.

Each worker gets its own PostgreSQL database, its own MariaDB database and its own
Redis database number, so workers never see each other's rows or keys. The service
addresses can be overridden (CI on another machine) with BASTION_TEST_PG,
BASTION_TEST_MYSQL and BASTION_TEST_REDIS, each a base URL without a database.

Database names carry the run's id (pytest-xdist's test run id, shared by a session's
workers), so two sessions on one server never touch each other's databases; each
session drops the databases it made when it ends (tests/conftest.py).
BASTION_TEST_SLOT shifts every worker's index, so that two pytest sessions on one
machine (say two working trees) also get their own ports and Redis databases: give each
session its own slot, at least its worker count apart.
"""

from __future__ import annotations

import os
import re
import uuid

PG_BASE = os.environ.get("BASTION_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
MYSQL_BASE = os.environ.get("BASTION_TEST_MYSQL", "mysql://root@127.0.0.1:3306")
REDIS_BASE = os.environ.get("BASTION_TEST_REDIS", "redis://127.0.0.1:6379")


def worker_index() -> int:
    """0 for the controller or a run without xdist, n for worker gw<n>; plus the slot."""
    m = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return (int(m.group(1)) if m else 0) + int(os.environ.get("BASTION_TEST_SLOT", "0"))


#: This process's run id when pytest-xdist gave none (a run without -n).
_LOCAL_RUN = uuid.uuid4().hex


def run_id() -> str:
    """One id per pytest session, the same in all of its xdist workers."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID", _LOCAL_RUN)[:8]


def db_name(purpose: str = "main") -> str:
    return f"bastion_{run_id()}_{worker_index()}_{purpose}"


def redis_db() -> int:
    """Redis has 16 databases; db 0 is left alone for anything else on the machine."""
    return 1 + worker_index() % 15
