"""Where the test suite finds the real services, isolated per pytest-xdist worker.

Each worker gets its own PostgreSQL database, its own MariaDB database and its own
Redis database number, so workers never see each other's rows or keys. The service
addresses can be overridden (CI on another machine) with BASTION_TEST_PG,
BASTION_TEST_MYSQL and BASTION_TEST_REDIS, each a base URL without a database.

BASTION_TEST_SLOT shifts every worker's index, so that two pytest sessions on one
machine (say two working trees) can run at once without sharing a port, a database
or a Redis database: give each session its own slot, at least its worker count apart.
"""

from __future__ import annotations

import os
import re

PG_BASE = os.environ.get("BASTION_TEST_PG", "postgresql://postgres@127.0.0.1:5432")
MYSQL_BASE = os.environ.get("BASTION_TEST_MYSQL", "mysql://root@127.0.0.1:3306")
REDIS_BASE = os.environ.get("BASTION_TEST_REDIS", "redis://127.0.0.1:6379")


def worker_index() -> int:
    """0 for the controller or a run without xdist, n for worker gw<n>; plus the slot."""
    m = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return (int(m.group(1)) if m else 0) + int(os.environ.get("BASTION_TEST_SLOT", "0"))


def db_name(purpose: str = "main") -> str:
    return f"bastion_t{worker_index()}_{purpose}"


def redis_db() -> int:
    """Redis has 16 databases; db 0 is left alone for anything else on the machine."""
    return 1 + worker_index() % 15
