"""Subject rules of check/list permissions and ``require_relations`` for a non-admin caller.

Over HTTP no caller can be identified until user sessions land (issue 3), so the caller's
own subject comes here from a Service that knows it, exactly as the real one will expose
it (``caller_subject``). The store is the real in-process one.
"""

from __future__ import annotations

from typing import Any

import pytest

from bastion.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
)
from bastion.core.fga.tuples import TupleKey
from bastion.service.context import CallerContext, Protocol
from bastion.service.fga.service import NOT_ENABLED, FgaService
from bastion.service.metrics import Metrics
from bastion.service.requests import bind
from bastion.storage.fga import MemoryFgaStore, StoredModel
from tests.server.test_fga_api import MODEL

CALLER = CallerContext(protocol=Protocol.REST, client_ip="127.0.0.1", bearer_token="token-of-ann")
ONE_CHECK = {"checks": [{"relation": "reader", "object": "sheet:1"}]}


class KnowsTheCaller:
    """A Service whose callers are identified (what issue 3 adds), and never admins."""

    storage: Any = None

    async def is_admin(self, caller: CallerContext) -> bool:
        return False

    async def require_admin(self, caller: CallerContext) -> None:
        raise Unauthenticated("unauthorized")

    async def caller_subject(self, caller: CallerContext) -> str:
        if caller.bearer_token != "token-of-ann":
            raise Unauthenticated("unauthorized")
        return "user:ann"


async def _fga() -> FgaService:
    store = MemoryFgaStore()
    await store.write_model(StoredModel("01J00000000000000000000000", MODEL))
    await store.write_tuples([TupleKey("sheet:1", "reader", "user:ann")])
    return FgaService(KnowsTheCaller(), store, Metrics())


async def test_the_caller_is_the_subject() -> None:
    fga = await _fga()
    own = await bind(fga.check_permissions)(dict(ONE_CHECK), CALLER)
    assert own.body["results"][0]["allowed"] is True
    same = await bind(fga.check_permissions)({**ONE_CHECK, "user": "ann"}, CALLER)
    assert same.body == own.body
    listed = await bind(fga.list_permissions)({"user": "user:ann"}, CALLER)
    assert listed.body["objects"] == ["sheet:1"]


@pytest.mark.parametrize("operation", ["check_permissions", "list_permissions"])
async def test_another_subject_is_refused(operation: str) -> None:
    fga = await _fga()
    with pytest.raises(
        PermissionDenied, match="not authorized to query authorization for another subject"
    ):
        await bind(getattr(fga, operation))({**ONE_CHECK, "user": "bob"}, CALLER)


async def test_without_the_seam_a_non_admin_is_unauthenticated() -> None:
    class Plain(KnowsTheCaller):
        caller_subject = None  # type: ignore[assignment]

    fga = FgaService(Plain(), MemoryFgaStore(), Metrics())
    with pytest.raises(Unauthenticated, match="unauthorized"):
        await bind(fga.check_permissions)(dict(ONE_CHECK), CALLER)


async def test_require_relations_is_all_of_them() -> None:
    fga = await _fga()
    await fga.require_relations("ann", [])
    await fga.require_relations("ann", [{"relation": "reader", "object": "sheet:1"}])
    with pytest.raises(PermissionDenied, match=r"^unauthorized$"):
        await fga.require_relations(
            "ann",
            [
                {"relation": "reader", "object": "sheet:1"},
                {"relation": "reader", "object": "sheet:2"},
            ],
        )
    with pytest.raises(PermissionDenied, match=r"^unauthorized$"):
        await fga.require_relations("ann", [{"relation": "nosuch", "object": "sheet:1"}])
    with pytest.raises(InvalidArgument, match="each required relation needs relation and object"):
        await fga.require_relations("ann", [{"relation": "reader"}])
    off = FgaService(KnowsTheCaller(), None, Metrics())
    await off.require_relations("ann", [])
    with pytest.raises(FailedPrecondition, match=f"^{NOT_ENABLED}$"):
        await off.require_relations("ann", [{"relation": "reader", "object": "sheet:1"}])
