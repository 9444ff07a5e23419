"""argon2id with the fixed parameters, bcrypt imports, and hashing off the event loop."""

from __future__ import annotations

import bcrypt
import pytest
import trio
import trio.lowlevel
import trio.testing
from argon2 import extract_parameters

from bastion.service.passwords import PasswordHasher, hashes_at_once


async def test_argon2id_with_the_fixed_parameters() -> None:
    hasher = PasswordHasher()
    stored = await hasher.hash("Correct-horse-1")
    assert stored.startswith("$argon2id$")
    params = extract_parameters(stored)
    assert (params.time_cost, params.memory_cost, params.parallelism) == (2, 19456, 1)
    assert await hasher.verify(stored, "Correct-horse-1") == (True, False)
    assert await hasher.verify(stored, "wrong") == (False, False)


async def test_bcrypt_hashes_verify_and_ask_for_a_rehash() -> None:
    hasher = PasswordHasher()
    stored = bcrypt.hashpw(b"Imported-1", bcrypt.gensalt(rounds=4)).decode()
    assert await hasher.verify(stored, "Imported-1") == (True, True)
    assert await hasher.verify(stored, "nope") == (False, False)


async def test_malformed_hash_never_matches() -> None:
    hasher = PasswordHasher()
    for stored in ("", "plain-text", "$argon2id$garbage", "$2b$garbage"):
        assert await hasher.verify(stored, "plain-text") == (False, False)


async def test_hashing_leaves_the_event_loop_free() -> None:
    hasher = PasswordHasher(concurrency=2)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await hasher.hash("x")
        await hasher.verify_dummy("y")
        nursery.cancel_scope.cancel()
    # The loop kept running other tasks while the hashes were computed in threads.
    assert ticks > 10


def test_workers_share_the_cores_for_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert [hashes_at_once(n) for n in (1, 2, 3)] == [2, 1, 1]
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert [hashes_at_once(n) for n in (1, 2, 3, 8, 16)] == [8, 4, 3, 1, 1]
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert hashes_at_once(4) == 1


async def test_a_hasher_runs_at_most_its_share_at_once() -> None:
    hasher = PasswordHasher(concurrency=1)
    real = hasher._argon2
    running = most = 0

    class Counting:
        def hash(self, password: str) -> str:
            nonlocal running, most
            running += 1
            most = max(most, running)
            try:
                return real.hash(password)
            finally:
                running -= 1

    hasher._argon2 = Counting()  # type: ignore[assignment]
    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(hasher.hash, f"pw-{n}")
    assert most == 1
