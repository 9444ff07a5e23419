"""The read-replica view of an authorization store (``storage.fga_replica``) and the
engine following it: a lagging or failing replica is stood in for by a second memory
store fed by hand. The same rules on real PostgreSQL servers:
``tests/server/test_fga_replica.py``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bastion.core.fga.tuples import TupleKey
from bastion.service.fga.engine import EngineState
from bastion.storage.errors import StorageUnavailable
from bastion.storage.fga import MemoryFgaStore, StoredModel
from bastion.storage.fga_replica import RETRY_AFTER, ReplicaReads, ReplicatedFgaStore

MODEL = StoredModel(
    "01HZZZZZZZZZZZZZZZZZZZZZZZ",
    "model\n  schema 1.1\n\ntype user\n\ntype doc\n  relations\n    define viewer: [user]\n",
)
ANN = TupleKey("doc:1", "viewer", "user:ann")
BOB = TupleKey("doc:1", "viewer", "user:bob")


class Replica(MemoryFgaStore):
    """A replica that may be down: every read then fails as an unreachable database."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def _reached(self) -> None:
        self.calls += 1
        if self.down:
            raise StorageUnavailable("cannot connect to the postgresql database: refused")

    async def revision(self) -> int:
        self._reached()
        return await super().revision()

    async def changes_since(self, revision: int) -> Any:
        self._reached()
        return await super().changes_since(revision)

    async def head(self) -> Any:
        self._reached()
        return await super().head()

    async def fetch(self, reads: Any) -> Any:
        self._reached()
        return await super().fetch(reads)


class Setup:
    def __init__(self) -> None:
        self.now = 0.0
        self.primary = MemoryFgaStore()
        self.replica = Replica()
        self.reads = ReplicaReads(db=None, clock=lambda: self.now)  # type: ignore[arg-type]
        self.view = ReplicatedFgaStore(self.primary, self.replica, self.reads)
        self.engine = EngineState(self.view)

    async def both(self, write: Callable[[MemoryFgaStore], Awaitable[int]]) -> None:
        """A write through another process that the replica has replayed."""
        await write(self.primary)
        await write(self.replica)

    async def sees(self, key: TupleKey) -> bool:
        return await self.engine.evaluate(
            lambda reader: key in set(reader.read(key.object, key.relation))
        )


@pytest.fixture
async def setup() -> Setup:
    found = Setup()
    await found.both(lambda s: s.write_model(MODEL))
    await found.both(lambda s: s.write_tuples([ANN]))
    return found


async def test_the_engine_follows_the_replica(setup: Setup) -> None:
    await setup.engine.fresh()
    assert await setup.sees(ANN)
    assert setup.reads.reads["replica"] > 0
    assert setup.reads.reads["behind"] == setup.reads.reads["unavailable"] == 0


async def test_another_processs_write_waits_for_the_replica_unless_asked_for(
    setup: Setup,
) -> None:
    await setup.engine.fresh()
    await setup.primary.write_tuples([BOB])  # not replayed yet
    await setup.engine.fresh()
    assert not await setup.sees(BOB)
    await setup.engine.fresh(consistent=True)
    assert await setup.sees(BOB)
    assert setup.reads.reads["behind"] > 0
    # Never back: the replica's older answers are not taken any more.
    await setup.engine.fresh()
    assert await setup.sees(BOB)
    assert setup.engine.revision == await setup.primary.revision()


async def test_this_processs_own_write_is_seen_at_once_and_written_to_the_primary(
    setup: Setup,
) -> None:
    await setup.engine.fresh()
    revision = await setup.view.write_tuples([BOB])
    await setup.engine.fresh()
    assert await setup.sees(BOB)
    assert setup.view.floor == revision
    assert await setup.replica.revision() < revision  # nothing written to the replica


async def test_a_replica_down_is_read_around_then_tried_again(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.replica.down = True
    await setup.primary.write_tuples([BOB])
    await setup.engine.fresh()
    assert await setup.sees(BOB)
    assert not setup.reads.up
    assert "read replica unavailable" in caplog.text
    # Resting: the replica is left alone, the primary answers.
    calls = setup.replica.calls
    await setup.engine.fresh()
    assert setup.replica.calls == calls
    assert setup.reads.reads["unavailable"] >= 2
    # Back after the rest.
    setup.replica.down = False
    await setup.replica.write_tuples([BOB])
    setup.now += RETRY_AFTER + 1
    await setup.engine.fresh()
    assert setup.reads.up
    assert setup.replica.calls > calls
    assert "read replica back" in caplog.text
