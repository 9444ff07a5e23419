"""The workers' shares of one listening socket (transports.http.balance)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bastion.transports.http.balance import (
    ABSENT,
    YIELD_LIMIT,
    AcceptShares,
    WorkerShare,
    over_share,
)


@pytest.mark.parametrize(
    ("counts", "index", "over"),
    [
        ([0, 0], 0, False),
        ([1, 0], 0, True),
        ([1, 0], 1, False),
        ([5, 4, 5], 0, True),
        ([4, 4, 5], 1, False),
        ([3, ABSENT], 0, False),  # the other is not running: take everything
        ([ABSENT, 0], 0, False),
        ([9, ABSENT, 8], 0, True),
    ],
)
def test_a_worker_holding_more_than_another_lets_it_accept(
    counts: list[int], index: int, over: bool
) -> None:
    assert over_share(counts, index) is over


def test_the_file_starts_with_every_worker_absent_and_is_shared(tmp_path: Path) -> None:
    path = tmp_path / "connections"
    AcceptShares.create(path, 3)
    mine, theirs = AcceptShares(path, 3), AcceptShares(path, 3)
    assert mine.counts() == [ABSENT] * 3
    WorkerShare(mine, 1).publish(7)
    assert theirs.counts() == [ABSENT, 7, ABSENT]
    WorkerShare(mine, 1).leave()
    assert theirs.counts() == [ABSENT] * 3


async def test_an_over_share_worker_waits_for_the_others_but_not_forever(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    path = tmp_path / "connections"
    AcceptShares.create(path, 2)
    shares = AcceptShares(path, 2)
    busy, idle = WorkerShare(shares, 0), WorkerShare(shares, 1)
    busy.publish(2)
    idle.publish(1)
    started = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(busy.take_turn)
        await trio.sleep(YIELD_LIMIT / 4)
        idle.publish(2)  # the other took one: now even
    assert trio.current_time() - started < YIELD_LIMIT / 2
    idle.publish(0)  # the other never catches up: the wait ends at the limit
    started = trio.current_time()
    await busy.take_turn()
    assert YIELD_LIMIT <= trio.current_time() - started < 2 * YIELD_LIMIT
