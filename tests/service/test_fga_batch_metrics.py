"""check_permissions counts a batch's answers once per batch: the same totals as per check."""

from __future__ import annotations

from typing import Any

from bastion.core.fga.tuples import TupleKey
from bastion.service.context import CallerContext, Protocol
from bastion.service.fga.requests import CheckPermissionsRequest
from bastion.service.fga.service import FgaService
from bastion.service.metrics import Metrics
from bastion.storage.fga import MemoryFgaStore, StoredModel

MODEL = """model
  schema 1.1

type user

type doc
  relations
    define viewer: [user]
"""


class _Admins:
    """The slice of the Service that check_permissions asks: every caller is an admin."""

    storage: Any = None

    async def is_admin(self, caller: CallerContext) -> bool:
        return True

    async def require_admin(self, caller: CallerContext) -> None:
        return None


async def test_a_batch_counts_each_answer_and_observes_each_check() -> None:
    store = MemoryFgaStore()
    await store.write_model(StoredModel("m", MODEL))
    await store.write_tuples([TupleKey("doc:1", "viewer", "user:ann")])
    metrics = Metrics()
    fga = FgaService(_Admins(), store, metrics)
    checks = [
        {"relation": "viewer", "object": "doc:1"},  # allowed
        {"relation": "viewer", "object": "doc:2"},  # denied
        {"relation": "viewer", "object": "doc:3"},  # denied
        {"relation": "owner", "object": "doc:1"},  # error: no such relation
    ]
    caller = CallerContext(protocol=Protocol.REST, client_ip="127.0.0.1")
    reply = await fga.check_permissions(
        CheckPermissionsRequest(user="user:ann", checks=checks), caller
    )
    assert [(r["allowed"], "error" in r) for r in reply.body["results"]] == [
        (True, False),
        (False, False),
        (False, False),
        (False, True),
    ]

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    operation = "check_permissions"
    total = "bastion_fga_checks_total"
    assert sample(total, operation=operation, result="allowed") == 1
    assert sample(total, operation=operation, result="denied") == 2
    assert sample(total, operation=operation, result="error") == 1
    assert sample("bastion_fga_check_duration_seconds_count", operation=operation) == 4
