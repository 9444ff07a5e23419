"""One driver suite for every storage and both drivers: the in-memory ``MemoryStore`` and
the sqlite3 store of ``examples/sync_sqlite_login.py``, each under ``SyncDriver`` and
under ``AsyncDriver`` on asyncio and on trio (over an ``AsyncStorage`` whose every call
yields to the loop first). Whole flows chain machines through their handoffs: phone signup
-> SMS code, email signup -> link -> verification, magic link, password reset by email and
by phone, refresh, a TOTP enrolment; two logins get two session families; a code spent by
another request meanwhile is refused and keeps no session; and two requests verifying one
code at the same moment (threads, or tasks) have exactly one winner."""

from __future__ import annotations

import dataclasses
import importlib.util
import pickle
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

import anyio
import anyio.lowlevel
import pyotp
import pytest

from bastion.core.auth import totp
from bastion.core.auth.mfa import EnrolmentResponse, MfaPolicy
from bastion.core.auth.otp import derive_key
from bastion.core.auth.responses import AuthResponse
from bastion.core.auth.user import User
from bastion.core.errors import BastionError, InvalidArgument
from bastion.core.reference import (
    Argon2Hasher,
    AsyncDriver,
    JwtSigner,
    MemoryStore,
    OtpCodes,
    Storage,
    SyncDriver,
)
from bastion.core.state_machines import (
    Event,
    ForgotPasswordRequested,
    LoginMachine,
    LoginRequested,
    Machine,
    MagicLinkMachine,
    MagicLinkRequested,
    MfaMachine,
    PasswordResetMachine,
    RefreshRequested,
    ResetPasswordRequested,
    Result,
    SendEmail,
    SendSms,
    SessionMachine,
    SignupMachine,
    SignupRequested,
    VerificationMachine,
    VerifyEmailRequested,
    VerifyOtpRequested,
)
from tests.core.state_machines.harness import NOW, PHONE, STRONG, CountingIds, FixedClock
from tests.core.state_machines.harness import env as make_env

SECRET = "a-server-secret-of-at-least-32-bytes!"
HASHER = Argon2Hasher(time_cost=1, memory_cost_kib=8)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sync_sqlite_login.py"
_spec = importlib.util.spec_from_file_location("sync_sqlite_login", EXAMPLE)
assert _spec is not None
assert _spec.loader is not None
sqlite_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sqlite_example)
MODES = ("sync", "asyncio", "trio")


class SeededRandomness:
    def __init__(self) -> None:
        self._random = random.Random(7)

    def token_bytes(self, n: int) -> bytes:
        return self._random.randbytes(n)

    def randbelow(self, n: int) -> int:
        return self._random.randrange(n)


class Wrapper:
    """A storage passed through; a subclass changes one method."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


class AsyncOver:
    """An ``AsyncStorage`` over a storage: every call first yields to the event loop (so
    tasks interleave at each one), and a transaction holds ``lock`` (shared by the tasks
    over one connection) until it commits or rolls back; calls outside one take it too."""

    def __init__(self, store: Any, lock: anyio.Lock) -> None:
        self.store, self.lock, self.inside = store, lock, False

    async def begin(self) -> None:
        await self.lock.acquire()
        self.inside = True
        self.store.begin()

    async def _end(self, verb: str) -> None:
        try:
            getattr(self.store, verb)()
        finally:
            self.inside = False
            self.lock.release()

    async def commit(self) -> None:
        await self._end("commit")

    async def rollback(self) -> None:
        await self._end("rollback")

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.store, name)

        async def call(*args: Any) -> Any:
            await anyio.lowlevel.checkpoint()
            if self.inside:
                return method(*args)
            async with self.lock:
                return method(*args)

        return call


class Kit:
    """A driver of one mode over one storage, run synchronously whatever its mode."""

    def __init__(
        self, new_store: Callable[[], Any], mode: str, mfa: MfaPolicy | None, **policy: Any
    ) -> None:
        self.new_store, self.mode, self.store = new_store, mode, new_store()
        flags = {"email_enabled": True, "sms_enabled": True, **policy}
        self.driver = self.make(self.store, make_env(**flags), mfa)

    def make(self, store: Any, env: Any, mfa: MfaPolicy | None) -> Any:
        parts: dict[str, Any] = {
            "hasher": HASHER,
            "signer": JwtSigner(SECRET),
            "codes": OtpCodes(derive_key(SECRET), SeededRandomness()),
            "randomness": SeededRandomness(),
            "mfa_policy": mfa,
        }
        if self.mode == "sync":
            return SyncDriver(env, store, **parts)
        return AsyncDriver(env, store, **parts)

    def run(self, flow: type[Machine[Any]], event: Event, store: Any = None) -> Result:
        machine = flow(self.driver.env)
        if self.mode == "sync":
            self.driver.store = store or self.store
            result: Result = self.driver.run(machine, event)
            return result

        async def run() -> Result:
            self.driver.store = AsyncOver(store or self.store, anyio.Lock())
            answer: Result = await self.driver.run(machine, event)
            return answer

        return anyio.run(run, backend=self.mode)

    @property
    def cookies(self) -> dict[str, str | None]:
        cookies: dict[str, str | None] = self.driver.cookies
        return cookies

    def user(self, **where: str) -> User:
        ((by, value),) = where.items()
        found: User | None = self.store.find_user(by, value)
        assert found is not None
        return found

    def store_get(self, kind: str, key: str) -> Any:
        return self.store.get(kind, key)

    def outbox(self, kind: type[Any]) -> list[Any]:
        if isinstance(self.store, MemoryStore):
            return {SendEmail: self.store.outbox.mails, SendSms: self.store.outbox.texts}[kind]
        query = "select item from outbox where kind = ? order by id"
        rows = self.store.db.execute(query, (kind.__name__,))
        return [pickle.loads(item) for (item,) in rows]


class KitMaker(Protocol):
    def __call__(self, mfa: MfaPolicy | None = None, **policy: Any) -> Kit: ...


@pytest.fixture(params=[(s, m) for s in ("memory", "sqlite") for m in MODES], ids="-".join)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> KitMaker:
    kind, mode = request.param
    path = str(tmp_path / "bastion.db")

    shared = MemoryStore()

    def new_store() -> Storage:
        """A connection to the test's storage (in memory: the one store)."""
        return shared if kind == "memory" else sqlite_example.SqliteStore(path)

    return lambda mfa=None, **policy: Kit(new_store, mode, mfa, **policy)


def token_of(url: str | None) -> str:
    assert url is not None
    return parse_qs(urlparse(url).query)["token"][0]


def test_a_phone_signup_hands_over_to_the_sms_code_that_completes_it(kit: KitMaker) -> None:
    d = kit(enable_phone_verification=True)
    signup = SignupRequested(phone_number=PHONE, password=STRONG, confirm_password=STRONG)
    sent = d.run(SignupMachine, signup)
    assert isinstance(sent, AuthResponse)
    assert sent.should_show_mobile_otp_screen
    (text,) = d.outbox(SendSms)
    code = text.body.rsplit(" ", 1)[-1]
    verify = VerifyOtpRequested(challenge_id=d.cookies["mfa"], code=code, phone_number=PHONE)
    done = d.run(MfaMachine, verify)
    assert isinstance(done, AuthResponse)
    assert done.access_token
    user = d.user(phone_number=PHONE)
    assert user.phone_number_verified
    assert d.store_get("sessions", user.id), "the session was kept"


def test_an_email_signup_link_signs_in_through_the_verification_flow(kit: KitMaker) -> None:
    d = kit(enable_email_verification=True)
    signup = SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG)
    d.run(SignupMachine, signup)
    (mail,) = d.outbox(SendEmail)
    done = d.run(VerificationMachine, VerifyEmailRequested(token=token_of(mail.verification_url)))
    assert isinstance(done, AuthResponse)
    assert done.access_token
    assert d.user(email="ann@example.com").email_verified
    with pytest.raises(BastionError, match="invalid verification token"):
        d.run(
            VerificationMachine,
            VerifyEmailRequested(token=token_of(mail.verification_url)),
        )


def test_a_magic_link_creates_the_account_and_signs_in(kit: KitMaker) -> None:
    d = kit(enable_magic_link_login=True)
    d.run(MagicLinkMachine, MagicLinkRequested(email="bob@example.com"))
    (mail,) = d.outbox(SendEmail)
    done = d.run(VerificationMachine, VerifyEmailRequested(token=token_of(mail.verification_url)))
    assert isinstance(done, AuthResponse)
    assert done.user is not None
    assert done.user.email == "bob@example.com"


def test_a_password_reset_by_email_replaces_the_password_and_ends_sessions(kit: KitMaker) -> None:
    d = kit()
    d.run(
        SignupMachine,
        SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG),
    )
    ann = d.user(email="ann@example.com")
    assert d.store_get("sessions", ann.id)
    d.run(PasswordResetMachine, ForgotPasswordRequested(email="ann@example.com"))
    mail = d.outbox(SendEmail)[-1]
    new = "N3w-Passw0rd!"
    reset = ResetPasswordRequested(
        token=token_of(mail.verification_url), password=new, confirm_password=new
    )
    d.run(PasswordResetMachine, reset)
    assert not d.store_get("sessions", ann.id)
    with pytest.raises(BastionError, match="invalid credentials"):
        d.run(LoginMachine, LoginRequested(email="ann@example.com", password=STRONG))
    done = d.run(LoginMachine, LoginRequested(email="ann@example.com", password=new))
    assert isinstance(done, AuthResponse)
    assert done.access_token


def test_a_password_reset_by_phone_hands_over_to_the_sms_code(kit: KitMaker) -> None:
    d = kit()
    d.run(
        SignupMachine,
        SignupRequested(phone_number=PHONE, password=STRONG, confirm_password=STRONG),
    )
    d.run(PasswordResetMachine, ForgotPasswordRequested(phone_number=PHONE))
    code = d.outbox(SendSms)[-1].body.rsplit(" ", 1)[-1]
    new = "N3w-Passw0rd!"
    reset = ResetPasswordRequested(
        challenge_id=d.cookies["mfa"],
        otp=code,
        phone_number=PHONE,
        password=new,
        confirm_password=new,
    )
    d.run(PasswordResetMachine, reset)
    done = d.run(LoginMachine, LoginRequested(phone_number=PHONE, password=new))
    assert isinstance(done, AuthResponse)
    assert done.access_token


def test_a_refresh_token_rotates_once(kit: KitMaker) -> None:
    d = kit()
    signup = SignupRequested(
        email="ann@example.com",
        password=STRONG,
        confirm_password=STRONG,
        scope=("openid", "offline_access"),
    )
    first = d.run(SignupMachine, signup)
    assert isinstance(first, AuthResponse)
    assert first.refresh_token
    claims = d.driver.signer.verify(first.refresh_token)
    refresh = RefreshRequested(refresh_token=first.refresh_token, claims=claims)
    again = d.run(SessionMachine, refresh)
    assert again.to_api_dict()["access_token"]
    with pytest.raises(BastionError):
        d.run(SessionMachine, refresh)


def test_two_logins_through_one_driver_get_two_session_families(kit: KitMaker) -> None:
    """One driver serves many requests: each login starts its own family (``sid``); a
    refresh keeps the family of the session it refreshes."""
    d = kit()
    sids = []
    for email in ("ann@example.com", "bob@example.com"):
        signup = SignupRequested(
            email=email,
            password=STRONG,
            confirm_password=STRONG,
            scope=("openid", "offline_access"),
        )
        answer = d.run(SignupMachine, signup)
        assert isinstance(answer, AuthResponse)
        assert answer.refresh_token
        sids.append(d.driver.signer.verify(answer.access_token)["sid"])
        refresh_claims = d.driver.signer.verify(answer.refresh_token)
        refreshed = d.run(
            SessionMachine,
            RefreshRequested(refresh_token=answer.refresh_token, claims=refresh_claims),
        )
        assert d.driver.signer.verify(refreshed.to_api_dict()["access_token"])["sid"] == sids[-1]
    assert sids[0] != sids[1]


def test_a_totp_login_enrols_then_accepts_the_authenticator_code(kit: KitMaker) -> None:
    clock = FixedClock(at=NOW)
    d = kit(MfaPolicy(enable_mfa=True, enforce_mfa=True, enable_totp_login=True))
    d.driver.env = dataclasses.replace(d.driver.env, clock=clock, ids=CountingIds())
    d.run(
        SignupMachine,
        SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG),
    )
    shown = d.run(LoginMachine, LoginRequested(email="ann@example.com", password=STRONG))
    secret = shown.to_api_dict()["authenticator_secret"]
    code = pyotp.TOTP(secret).at(NOW)
    verify = VerifyOtpRequested(
        challenge_id=d.cookies["mfa"], code=code, is_totp=True, email="ann@example.com"
    )
    done = d.run(MfaMachine, verify)
    assert isinstance(done, AuthResponse)
    assert done.access_token
    assert d.store_get("authenticator", d.user(email="ann@example.com").id).verified


@pytest.mark.parametrize("spent", ["authenticator", "recovery_code"])
def test_a_code_spent_by_another_request_meanwhile_is_refused_and_keeps_no_session(
    kit: KitMaker, spent: str
) -> None:
    """The code is checked against the authenticator loaded, and spent in the final
    commit: spent by another request in between (here, as the challenge is taken), that
    commit refuses with "invalid otp" and the session kept for the sign-in is dropped."""
    d = kit(MfaPolicy(enable_mfa=True, enforce_mfa=True, enable_totp_login=True))
    d.driver.env = dataclasses.replace(d.driver.env, clock=FixedClock(at=NOW), ids=CountingIds())
    signup = SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG)
    d.run(SignupMachine, signup)
    login = LoginRequested(email="ann@example.com", password=STRONG)
    shown = d.run(LoginMachine, login)
    assert isinstance(shown, EnrolmentResponse)
    secret, codes = shown.authenticator_secret, shown.authenticator_recovery_codes
    enrol = VerifyOtpRequested(
        challenge_id=d.cookies["mfa"],
        code=pyotp.TOTP(secret).at(NOW),
        is_totp=True,
        email="ann@example.com",
    )
    d.run(MfaMachine, enrol)
    d.run(LoginMachine, login)
    code = pyotp.TOTP(secret).at(NOW + totp.STEP_SECONDS) if spent == "authenticator" else codes[0]
    user_id = d.user(email="ann@example.com").id
    found = d.store_get("authenticator", user_id)
    spent_elsewhere = dataclasses.replace(
        found,
        last_used_step=NOW // totp.STEP_SECONDS + 1,
        recovery_digests=tuple(
            x for x in found.recovery_digests if x != totp.recovery_digest(codes[0])
        ),
    )
    sessions = d.store_get("sessions", user_id)

    class SpentAsTheChallengeIsTaken(Wrapper):
        def take(self, kind: str, key: str) -> Any:
            if kind == "challenge":
                self.store.put("authenticator", user_id, spent_elsewhere)
            return self.store.take(kind, key)

    verify = VerifyOtpRequested(
        challenge_id=d.cookies["mfa"], code=code, is_totp=True, email="ann@example.com"
    )
    with pytest.raises(InvalidArgument, match="invalid otp"):
        d.run(MfaMachine, verify, store=SpentAsTheChallengeIsTaken(d.store))
    assert d.store_get("sessions", user_id) == sessions
    assert d.store_get("authenticator", user_id) == spent_elsewhere


def test_two_requests_verifying_one_code_at_once_have_one_winner(kit: KitMaker) -> None:
    """Both load the challenge (they wait for each other there), so both check the code
    before either takes the challenge: the one whose take wins signs in, the other is
    refused."""
    d = kit(MfaPolicy(enable_mfa=True, enable_email_otp=True, email_enabled=True))
    signup = SignupRequested(email="ann@example.com", password=STRONG, confirm_password=STRONG)
    d.run(SignupMachine, signup)
    d.run(LoginMachine, LoginRequested(email="ann@example.com", password=STRONG))
    mail = d.outbox(SendEmail)[-1]
    verify = VerifyOtpRequested(challenge_id=d.cookies["mfa"], code=mail.otp, email=mail.to)
    outcomes: list[str] = []

    def outcome(run: Callable[[], Result]) -> None:
        try:
            outcomes.append("signed in" if run().access_token else "no token")  # type: ignore[union-attr]
        except BastionError as error:
            outcomes.append(error.code)

    if d.mode == "sync":
        meeting = threading.Barrier(2, timeout=30)

        class Meet(Wrapper):
            def get(self, kind: str, key: str) -> Any:
                found = self.store.get(kind, key)
                if kind == "challenge":
                    meeting.wait()
                return found

        def request() -> None:
            driver = d.make(d.new_store(), d.driver.env, d.driver.mfa_policy)
            driver.store = Meet(driver.store)
            outcome(lambda: driver.run(MfaMachine(d.driver.env), verify))

        threads = [threading.Thread(target=request) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    else:

        async def race() -> None:
            lock, arrived, both = anyio.Lock(), [], anyio.Event()

            class Meet(Wrapper):
                async def get(self, kind: str, key: str) -> Any:
                    found = await self.store.get(kind, key)
                    if kind == "challenge":
                        arrived.append(key)
                        if len(arrived) == 2:
                            both.set()
                        await both.wait()
                    return found

            async def request() -> None:
                driver = d.make(Meet(AsyncOver(d.store, lock)), d.driver.env, d.driver.mfa_policy)
                result = await driver.run(MfaMachine(d.driver.env), verify)
                outcome(lambda: result)

            async def guarded() -> None:
                try:
                    await request()
                except BastionError as error:
                    outcomes.append(error.code)

            async with anyio.create_task_group() as group:
                group.start_soon(guarded)
                group.start_soon(guarded)

        anyio.run(race, backend=d.mode)
    assert sorted(outcomes) == ["signed in", "unauthenticated"]


def test_a_driver_refuses_email_switches_that_disagree() -> None:
    env = make_env(email_enabled=True)
    parts: dict[str, Any] = {
        "hasher": HASHER,
        "signer": JwtSigner(SECRET),
        "randomness": SeededRandomness(),
    }
    parts["codes"] = OtpCodes(derive_key(SECRET), SeededRandomness())
    with pytest.raises(ValueError, match="email_enabled"):
        SyncDriver(env, MemoryStore(), mfa_policy=MfaPolicy(enable_email_otp=True), **parts)
    assert SyncDriver(env, MemoryStore(), **parts).mfa_policy.email_enabled
