"""A password login with an emailed second factor, in plain synchronous Python.

Run: ``python examples/sync_login_email_code.py``. It prints each step and exits non-zero
when an outcome is not the expected one.
"""

from __future__ import annotations

import secrets
import sys
import time
import uuid

from bastion.core.auth.mfa import MfaPolicy
from bastion.core.auth.otp import derive_key
from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.auth.user import User
from bastion.core.errors import BastionError
from bastion.core.reference import Argon2Hasher, JwtSigner, MemoryStore, OtpCodes, SyncDriver
from bastion.core.state_machines import LoginMachine, LoginRequested, MfaMachine, VerifyOtpRequested

SERVER_SECRET = "change-me-to-32-or-more-random-bytes!!"


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


def check(what: str, ok: bool) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        sys.exit(1)


def main() -> None:
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
    now = int(time.time())
    store.users["u1"] = User(
        id="u1",
        email="ann@example.com",
        email_verified_at=now,
        password_hash=hasher.hash("correct horse battery staple"),
        signup_methods=("basic_auth",),
        roles=("user",),
        is_multi_factor_auth_enabled=True,
    )

    try:
        driver.run(LoginMachine(env), LoginRequested(email="ann@example.com", password="wrong"))
        check("a wrong password is refused", False)
    except BastionError as error:
        check(f"a wrong password is refused ({error.message})", error.code == "unauthenticated")

    login = LoginRequested(email="ann@example.com", password="correct horse battery staple")
    first = driver.run(LoginMachine(env), login)
    check(
        f"the password leads to a second factor: {first.message!r}",
        first.should_show_email_otp_screen,
    )
    mail = store.outbox.mails[-1]
    check(f"a code was mailed to {mail.to}", mail.otp is not None and len(mail.otp) == 6)

    challenge_id = driver.cookies["mfa"]
    verify = VerifyOtpRequested(challenge_id=challenge_id, code=mail.otp or "", email=mail.to)
    done = driver.run(MfaMachine(env), verify)
    check(f"the code signs in: {done.message!r}", bool(done.access_token))
    claims = driver.signer.verify(done.access_token or "")
    check(f"the access token names the user ({claims['sub']})", claims["sub"] == "u1")

    try:
        driver.run(MfaMachine(env), verify)
        check("the same code works twice", False)
    except BastionError as error:
        check(f"the code works once ({error.message})", error.code == "unauthenticated")


if __name__ == "__main__":
    main()
