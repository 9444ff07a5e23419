"""The same login with an emailed second factor, driven from asyncio.

The machines never block and never await: an async driver is the same loop with ``await``
where an effect does I/O. Here the slow effects (argon2) run in a worker thread and the
in-memory answers are called directly; a database-backed driver would await its queries
there. Two ``verify_otp`` race with one code: exactly one signs in.

Run: ``python examples/asyncio_login_email_code.py`` (exits non-zero when wrong).
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
import uuid
from typing import Any

from bastion.core.auth.mfa import MfaPolicy
from bastion.core.auth.otp import derive_key
from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.auth.user import User
from bastion.core.errors import BastionError
from bastion.core.reference import Argon2Hasher, JwtSigner, MemoryStore, OtpCodes, SyncDriver
from bastion.core.state_machines import (
    MACHINES,
    Effect,
    Event,
    Fail,
    Handoff,
    HashPassword,
    LoginMachine,
    LoginRequested,
    Machine,
    MfaMachine,
    Respond,
    VerifyOtpRequested,
    VerifyPasswordHash,
)
from bastion.core.state_machines.effects import Result

SERVER_SECRET = "change-me-to-32-or-more-random-bytes!!"
#: effects worth a thread: everything else answers from memory at once
SLOW = (VerifyPasswordHash, HashPassword)


class Clock:
    def now(self) -> float:
        return time.time()


class Ids:
    def new_id(self) -> str:
        return str(uuid.uuid4())


class Randomness:
    def token_bytes(self, n: int) -> bytes:
        return secrets.token_bytes(n)

    def randbelow(self, n: int) -> int:
        return secrets.randbelow(n)


async def run(driver: SyncDriver, machine: Machine[Any], event: Event) -> Result:
    """The driver loop with awaits: answer, commit, hand off, as the sync driver does."""
    effects: list[Effect] = machine.handle(event)
    while True:
        reply: Event | None = None
        for effect in effects:
            if isinstance(effect, Fail):
                driver.commit()
                raise effect.exception()
            if isinstance(effect, Respond):
                driver.commit()
                return effect.result
            if isinstance(effect, Handoff):
                return await run(driver, MACHINES[effect.flow](driver.env), effect.event)
            if effect.replies:
                driver.commit()
                if isinstance(effect, SLOW):
                    reply = await asyncio.to_thread(driver.answer, effect)
                else:
                    reply = driver.answer(effect)
                    await asyncio.sleep(0)  # a yield point, as a database round trip is
            else:
                driver.queue(effect)
        if reply is None:
            raise RuntimeError("the flow stopped without an answer")
        effects = machine.handle(reply)


def check(what: str, ok: bool) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        sys.exit(1)


async def main() -> None:
    policy = AuthPolicy(url="https://auth.example.com", client_id="example-app", email_enabled=True)
    env = FlowEnv(policy=policy, clock=Clock(), ids=Ids())
    hasher, store = Argon2Hasher(), MemoryStore()
    driver = SyncDriver(
        env,
        store,
        hasher=hasher,
        signer=JwtSigner(SERVER_SECRET),
        codes=OtpCodes(derive_key(SERVER_SECRET), Randomness()),
        randomness=Randomness(),
        mfa_policy=MfaPolicy(enable_mfa=True, enable_email_otp=True, email_enabled=True),
    )
    password = "correct horse battery staple"
    store.users["u1"] = User(
        id="u1",
        email="ann@example.com",
        email_verified_at=int(time.time()),
        password_hash=await asyncio.to_thread(hasher.hash, password),
        signup_methods=("basic_auth",),
        roles=("user",),
        is_multi_factor_auth_enabled=True,
    )

    login = LoginRequested(email="ann@example.com", password=password)
    first = await run(driver, LoginMachine(env), login)
    check(
        f"the password leads to a second factor: {first.message!r}",
        first.should_show_email_otp_screen,
    )
    mail = store.outbox.mails[-1]
    check(f"a code was mailed to {mail.to}", mail.otp is not None)

    verify = VerifyOtpRequested(
        challenge_id=driver.cookies["mfa"], code=mail.otp or "", email=mail.to
    )
    outcomes = await asyncio.gather(
        run(driver, MfaMachine(env), verify),
        run(driver, MfaMachine(env), verify),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BastionError)]
    check(
        "of two racing verifies with one code exactly one signs in",
        len(won) == 1 and len(lost) == 1,
    )
    check(f"the winner holds an access token ({won[0].message!r})", bool(won[0].access_token))
    check(f"the loser is refused ({lost[0].message!r})", lost[0].code == "unauthenticated")


if __name__ == "__main__":
    asyncio.run(main())
