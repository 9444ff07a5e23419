"""A password login with an emailed second factor from asyncio (and from trio, when it is
installed): ``AsyncDriver`` over the in-memory storage, and two requests racing with one
code, of which exactly one signs in.

Run: ``python examples/asyncio_login_email_code.py``. It prints each step and exits
non-zero when an outcome is not the expected one.
"""

import asyncio
import importlib.util
import secrets
import sys
import time
from types import SimpleNamespace

import bastion.core.state_machines as flows
from bastion.core.auth.mfa import MfaPolicy
from bastion.core.auth.otp import derive_key
from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.errors import BastionError
from bastion.core.reference import Argon2Hasher, AsyncDriver, JwtSigner, MemoryStore, OtpCodes

SECRET, PASSWORD = "change-me-to-32-or-more-random-bytes!!", "Correct-horse-7"


def check(what: str, ok: bool) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        sys.exit(1)


async def main(loop: str, offload, both) -> None:
    policy = AuthPolicy(url="https://auth.example.com", client_id="example", email_enabled=True)
    clock = SimpleNamespace(now=time.time, new_id=lambda: secrets.token_hex(16))
    env, store = FlowEnv(policy=policy, clock=clock, ids=clock), MemoryStore()
    mfa = MfaPolicy(enable_mfa=True, enable_email_otp=True, email_enabled=True)
    hasher = Argon2Hasher()

    def driver() -> AsyncDriver:  # one per request: it holds that request's cookies
        return AsyncDriver(
            env, store, hasher=hasher, signer=JwtSigner(SECRET), randomness=secrets,
            codes=OtpCodes(derive_key(SECRET), secrets), mfa_policy=mfa, offload=offload,
        )  # fmt: skip

    ann = {"email": "a@example.com", "password": PASSWORD}
    signup = flows.SignupRequested(**ann, confirm_password=PASSWORD)
    signed = await driver().run(flows.SignupMachine(env), signup)
    check(f"{loop}: ann signs up", bool(signed.access_token))
    login = driver()
    sent = await login.run(flows.LoginMachine(env), flows.LoginRequested(**ann))
    check(f"{loop}: her password asks for a code", sent.should_show_email_otp_screen)
    mail, outcomes = store.outbox.mails[-1], []
    verify = flows.VerifyOtpRequested(
        challenge_id=login.cookies["mfa"], code=mail.otp, email=mail.to
    )

    async def attempt() -> None:
        try:
            done = await driver().run(flows.MfaMachine(env), verify)
            outcomes.append("signed in" if done.access_token else "no token")
        except BastionError as error:
            outcomes.append(error.code)

    await both(attempt)
    one_winner = sorted(outcomes) == ["signed in", "unauthenticated"]
    check(f"{loop}: one code, two requests: {sorted(outcomes)}", one_winner)


async def asyncio_both(attempt) -> None:
    await asyncio.gather(attempt(), attempt())


async def trio_both(attempt) -> None:
    async with trio.open_nursery() as requests:
        requests.start_soon(attempt)
        requests.start_soon(attempt)


if __name__ == "__main__":
    asyncio.run(main("asyncio", asyncio.to_thread, asyncio_both))
    if importlib.util.find_spec("trio"):
        import trio

        trio.run(main, "trio", trio.to_thread.run_sync, trio_both)
