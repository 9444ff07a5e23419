"""The per-IP limiter's leases: fewer trips to the shared bucket, never a looser limit."""

from __future__ import annotations

import pytest

from bastion.core.errors import ResourceExhausted
from bastion.service.metrics import Metrics
from bastion.service.ratelimit import LEASE_SECONDS, RateLimiter, lease_size
from bastion.storage.memory.base import BucketState
from bastion.storage.memory.inprocess import InProcessMemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limiter(store: InProcessMemoryStore, clock: Clock, rps: float, burst: int) -> RateLimiter:
    return RateLimiter(
        store, rps=rps, burst=burst, fail_closed=False, metrics=Metrics(), clock=clock
    )


async def allowed(limiter: RateLimiter, count: int, ip: str = "203.0.113.9") -> int:
    passed = 0
    for _ in range(count):
        try:
            await limiter.check(ip, surface="rest")
        except ResourceExhausted:
            continue
        passed += 1
    return passed


async def shared_tokens(store: InProcessMemoryStore, ip: str = "203.0.113.9") -> float:
    raw = await store.get(f"rl:ip:{ip}")
    assert raw is not None
    return BucketState.decode(raw).tokens


def test_lease_size() -> None:
    assert lease_size(30, 20) == 3  # the defaults
    assert lease_size(100, 40) == 10
    assert lease_size(1000, 20) == 5  # a quarter of the burst at the most
    assert lease_size(5, 20) == 1  # slow limits: one token, as without leases
    assert lease_size(0.01, 3) == 1


async def test_a_lease_spends_locally_and_the_burst_is_still_exact() -> None:
    clock = Clock()
    store = InProcessMemoryStore(clock=clock)
    one = limiter(store, clock, rps=100, burst=40)
    assert await allowed(one, 1) == 1
    assert await shared_tokens(store) == 30  # a lease of ten left the shared bucket
    assert await allowed(one, 9) == 9
    assert await shared_tokens(store) == 30  # spent locally, no trip to the store
    # No time passes: the whole burst and not one request more.
    assert await allowed(one, 40) == 30
    assert await shared_tokens(store) == 0


async def test_two_instances_together_never_get_more_than_the_burst() -> None:
    clock = Clock()
    store = InProcessMemoryStore(clock=clock)
    first, second = limiter(store, clock, 100, 40), limiter(store, clock, 100, 40)
    passed = 0
    for _ in range(30):
        passed += await allowed(first, 1) + await allowed(second, 1)
    assert passed == 40


async def test_an_unused_lease_expires_and_is_lost_not_returned() -> None:
    clock = Clock()
    store = InProcessMemoryStore(clock=clock)
    one = limiter(store, clock, rps=100, burst=40)
    await allowed(one, 1)
    clock.now += LEASE_SECONDS  # nine leased tokens unused: gone with the lease
    # The bucket refilled meanwhile (100 per second, up to the burst) and a new lease left it.
    assert await allowed(one, 1) == 1
    assert await shared_tokens(store) == 30


@pytest.mark.parametrize(("rps", "burst"), [(0.01, 3), (5, 20)])
async def test_slow_limits_take_one_token_per_request(rps: float, burst: int) -> None:
    clock = Clock()
    store = InProcessMemoryStore(clock=clock)
    one = limiter(store, clock, rps=rps, burst=burst)
    assert await allowed(one, 1) == 1
    assert await shared_tokens(store) == burst - 1
