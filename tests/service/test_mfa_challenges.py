"""The MFA machine's challenge effects carried out on real memory stores (in-process,
SQL on SQLite and PostgreSQL, Redis): a code issued by one "server process" is verified
by another, codes are single use even when two verifies race, attempts are counted
across processes, and a resend kills the old code."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

from bastion.core.auth import otp
from bastion.core.auth.mfa import Method
from bastion.core.auth.policy import FlowEnv
from bastion.core.state_machines._machine import Effect, Event
from bastion.core.state_machines.effects import Fail, IssueTokens, LoadUser, Respond, SendEmail
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.mfa import (
    ChallengeRequested,
    MfaMachine,
    ResendOtpRequested,
    VerifyOtpRequested,
)
from bastion.core.state_machines.mfa_effects import SetMfaCookie, StoreChallenge
from bastion.service.mfa_challenges import CHALLENGE_EFFECTS, ChallengeStore
from bastion.service.system import SystemClock, SystemIds, SystemRandom
from bastion.storage import StorageConfig, open_storage
from bastion.storage.memory import InProcessMemoryStore, MemoryStore, RedisMemoryStore
from tests.core.state_machines.harness import EMAIL, policy, tokens
from tests.core.state_machines.mfa_samples import account
from tests.dbfixtures import fresh_postgres_url, fresh_redis_url, fresh_sqlite_url

KEY = otp.derive_key("jwt-secret")
USER = account()

#: opens one more connection ("server process") to the same shared store
Opener = Callable[[], AbstractAsyncContextManager[MemoryStore]]


@pytest.fixture(params=["inprocess", "redis", "sql-sqlite", "sql-postgres"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    kind: str = request.param
    if kind == "inprocess":
        shared = InProcessMemoryStore()

        @contextlib.asynccontextmanager
        async def same() -> AsyncIterator[MemoryStore]:
            yield shared

        yield same
        return
    if kind == "redis":
        url = await trio.to_thread.run_sync(fresh_redis_url)

        @contextlib.asynccontextmanager
        async def redis() -> AsyncIterator[MemoryStore]:
            store = RedisMemoryStore(url, pool_size=4, timeout=5)
            try:
                yield store
            finally:
                await store.aclose()

        yield redis
        return
    if kind == "sql-sqlite":
        config = StorageConfig(database_type="sqlite", database_url=fresh_sqlite_url(tmp_path))
    else:
        url = await trio.to_thread.run_sync(fresh_postgres_url, "mfa")
        config = StorageConfig(database_type="postgres", database_url=url)

    @contextlib.asynccontextmanager
    async def sql() -> AsyncIterator[MemoryStore]:
        async with open_storage(config) as storage:
            yield storage.memory

    yield sql


def challenges(memory: MemoryStore) -> ChallengeStore:
    return ChallengeStore(memory, otp_key=KEY, randomness=SystemRandom(), clock=SystemClock())


def flow_env() -> FlowEnv:
    return FlowEnv(policy=policy(), clock=SystemClock(), ids=SystemIds())


async def run(store: ChallengeStore, event: Event) -> list[Effect]:
    """A minimal driver: challenge effects on the real store, the rest answered here."""
    machine = MfaMachine(flow_env())
    effects, seen = machine.handle(event), []
    while True:
        reply: Event | None = None
        for effect in effects:
            seen.append(effect)
            if isinstance(effect, CHALLENGE_EFFECTS):
                reply = await store.execute(effect)
            elif isinstance(effect, LoadUser):
                reply = UserLoaded(user=USER)
            elif isinstance(effect, IssueTokens):
                reply = TokensIssued(tokens=tokens())
        if reply is None:
            return seen
        effects = machine.handle(reply)


async def issue(store: ChallengeStore) -> tuple[str, str]:
    """Start an email-code challenge: (cookie value, the code that was mailed)."""
    effects = await run(store, ChallengeRequested(user=USER, method=Method.EMAIL_OTP))
    (cookie,) = [e for e in effects if isinstance(e, SetMfaCookie)]
    (mail,) = [e for e in effects if isinstance(e, SendEmail)]
    assert mail.otp is not None
    return cookie.value, mail.otp


def outcome(effects: list[Effect]) -> str:
    last = effects[-1]
    if isinstance(last, Respond):
        return last.result.to_api_dict()["message"]
    assert isinstance(last, Fail)
    return last.message


def verify(cookie: str, code: str) -> VerifyOtpRequested:
    return VerifyOtpRequested(challenge_id=cookie, code=code, email=EMAIL)


async def test_a_challenge_begun_on_one_process_is_finished_on_another(opener: Opener) -> None:
    async with opener() as first, opener() as second:
        cookie, code = await issue(challenges(first))
        assert code.isdigit()
        assert len(code) == 6
        stored = await challenges(second).load(cookie)
        assert stored is not None
        assert code not in str(stored.to_dict())
        assert outcome(await run(challenges(second), verify(cookie, code))) == (
            "OTP verified successfully."
        )
        # single use: the same code again finds no challenge
        assert outcome(await run(challenges(first), verify(cookie, code))) == "invalid session"


async def test_two_concurrent_verifies_of_one_code_exactly_one_wins(opener: Opener) -> None:
    async with opener() as first, opener() as second:
        cookie, code = await issue(challenges(first))
        results: list[str] = []
        go = trio.Event()

        async def attempt(memory: MemoryStore) -> None:
            await go.wait()
            results.append(outcome(await run(challenges(memory), verify(cookie, code))))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(attempt, first)
            nursery.start_soon(attempt, second)
            go.set()
    assert sorted(results) == ["OTP verified successfully.", "invalid session"]


async def test_wrong_codes_are_counted_across_processes_until_the_challenge_dies(
    opener: Opener,
) -> None:
    async with opener() as first, opener() as second:
        cookie, code = await issue(challenges(first))
        wrong = f"{(int(code) + 1) % 1_000_000:06d}"
        for attempt in range(otp.MAX_ATTEMPTS):
            memory = first if attempt % 2 else second
            assert outcome(await run(challenges(memory), verify(cookie, wrong))) == "invalid otp"
        # the challenge is dead: even the right code is refused now
        assert outcome(await run(challenges(first), verify(cookie, code))) == "invalid session"
        assert await challenges(second).load(cookie) is None


async def test_a_resend_invalidates_the_old_code(opener: Opener) -> None:
    async with opener() as memory:
        store = challenges(memory)
        cookie, old_code = await issue(store)
        # let the resend interval pass on the challenge's own clock
        stored = await store.load(cookie)
        assert stored is not None
        backdated = stored.__class__.from_dict(
            {**stored.to_dict(), "issued_at": stored.issued_at - otp.RESEND_INTERVAL}
        )
        await store.store(backdated)
        effects = await run(store, ResendOtpRequested(challenge_id=cookie, email=EMAIL))
        assert outcome(effects) == "OTP has been sent. Please check your inbox"
        (new_cookie,) = [e.value for e in effects if isinstance(e, SetMfaCookie)]
        (mail,) = [e for e in effects if isinstance(e, SendEmail)]
        assert new_cookie != cookie
        assert await store.load(cookie) is None
        assert outcome(await run(store, verify(cookie, old_code))) == "invalid session"
        assert mail.otp is not None
        assert outcome(await run(store, verify(new_cookie, mail.otp))) == (
            "OTP verified successfully."
        )


async def test_forged_or_damaged_cookies_name_no_challenge(opener: Opener) -> None:
    async with opener() as memory:
        store = challenges(memory)
        assert await store.load("../../etc") is None
        assert await store.load("x" * 65) is None
        assert not await store.take("*")
        await memory.set("mfa_challenge:damaged", b"{not json", ttl=60)
        assert await store.load("damaged") is None
        assert outcome(await run(store, verify("damaged", "123456"))) == "invalid session"


async def test_an_expired_challenge_is_not_stored(opener: Opener) -> None:
    async with opener() as memory:
        store = challenges(memory)
        effects = await run(store, ChallengeRequested(user=USER, method=Method.EMAIL_OTP))
        (stored,) = [e.challenge for e in effects if isinstance(e, StoreChallenge)]
        gone = stored.__class__.from_dict(
            {**stored.to_dict(), "id": "old", "issued_at": 1, "expires_at": 2}
        )
        await store.store(gone)
        assert await store.load("old") is None
