"""A request answered with an error changed nothing (issue 27), at every step.

The real service layer runs on a real database (SQLite, PostgreSQL) and the in-process
memory store wrapped in :class:`Outage`: from its N-th operation on, every memory-store
operation raises :class:`StorageUnavailable`, as the Redis store does once Redis is down.
For each flow, each request of it and each N = 1, 2, ... until the request finishes
before its N-th operation, one run (a fresh account each time) asserts:

- the request answered, or it failed with the outage AND left the database exactly as it
  was (users, outbox, audit rows, links) AND the identical request, the store back, succeeds;
- the account then ends with exactly what a run without any outage leaves (the flow's
  ``record``): its user row, each webhook, mail and audit row once.

The queued mailed-link flows (``forgot_password``, ``magic_link_login``) run from the
outbox with the memory store down throughout: they need the database only.

``verify_otp`` runs with each kind of code: emailed, from an authenticator app (a step
after the enrolment's), a recovery code. Two verifies racing with one authenticator or
recovery code, each on its own challenge, are run so that the winner commits between the
loser's check of the code and the loser's commit: exactly one signs in.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyotp
import pytest
import sqlalchemy as sa
import trio

from bastion.core.auth import totp
from bastion.core.errors import InvalidArgument
from bastion.core.settings import Settings, settings_from_flags
from bastion.core.state_machines.effects import WebhookEvent
from bastion.service.auth.mailed_links import MAILED_LINK
from bastion.service.auth.mfa_outcomes import MFA_WEBHOOK_EVENTS
from bastion.service.auth.requests import (
    ForgotPasswordRequest,
    LoginRequest,
    MagicLinkLoginRequest,
    ResetPasswordRequest,
    SignupRequest,
    VerifyEmailRequest,
    VerifyOtpRequest,
)
from bastion.service.context import CallerContext, Protocol, Reply
from bastion.service.metrics import Metrics
from bastion.service.outbox import OutboxWorker
from bastion.service.runtime import Runtime
from bastion.storage import Storage, StorageConfig, StorageUnavailable, open_storage
from bastion.storage import users as user_rows
from bastion.storage import webhooks as webhook_rows
from bastion.storage.memory import InProcessMemoryStore, MemoryStore
from bastion.storage.sql.schema import (
    audit_logs,
    authenticators,
    outbox,
    users,
    verification_requests,
)
from tests.dbfixtures import fresh_postgres_url, fresh_sqlite_url
from tests.service.flags import QUEUED_MAIL, REQUIRED

PASSWORD = "Outage!pass1"
NEW_PASSWORD = "Outage!pass2"
#: what a failed request must leave exactly as it was
TABLES = (users, outbox, audit_logs, verification_requests, authenticators)


class Outage:
    """A memory store that goes down at its ``down_from``-th operation and stays down
    (every later operation fails too) until ``down_from`` is cleared. ``interleave``, if
    set, runs (once) before the next operation (named ``interleave_before``, if set):
    another request between two steps."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        #: operations asked for so far, failed ones included
        self.calls = 0
        #: the operations' names, in order
        self.names: list[str] = []
        self.down_from: int | None = None
        self.interleave: Callable[[], Awaitable[object]] | None = None
        self.interleave_before: str | None = None

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        operation = getattr(self._store, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            if self.interleave is not None and self.interleave_before in (None, name):
                other, self.interleave = self.interleave, None
                self.interleave_before = None
                await other()
            self.calls += 1
            self.names.append(name)
            if self.down_from is not None and self.calls >= self.down_from:
                raise StorageUnavailable("the memory store is down (test outage)")
            return await operation(*args, **kwargs)

        return counted

    @property
    def reached(self) -> bool:
        return self.down_from is not None and self.calls >= self.down_from


@dataclass
class Site:
    """The service layer on one database, with and without email verification."""

    storage: Storage
    memory: Outage
    plain: Runtime
    verifying: Runtime
    #: second factor: an authenticator app
    totp: Runtime


@dataclass
class Browser:
    """One account's requests: its address and the cookies its answers set."""

    email: str
    cookies: dict[str, str] = field(default_factory=dict)
    token: str = ""
    code: str = ""
    #: the authenticator app's secret, recovery codes and the step its enrolment used
    secret: str = ""
    recovery_codes: list[str] = field(default_factory=list)
    step: int = 0

    @property
    def caller(self) -> CallerContext:
        return CallerContext(
            protocol=Protocol.REST,
            client_ip="192.0.2.9",
            user_agent="outage-test",
            cookies=dict(self.cookies),
        )

    def keep(self, reply: Reply) -> Reply:
        for cookie in reply.cookies:
            if cookie.max_age > 0:
                self.cookies[cookie.name] = cookie.value
            else:
                self.cookies.pop(cookie.name, None)
        return reply


def _settings(**extra: str) -> Settings:
    """The flags the service layer reads (storage is opened by the fixture)."""
    return settings_from_flags(
        {
            **REQUIRED,
            **QUEUED_MAIL,
            "enable-magic-link-login": "true",
            "enable-mfa": "true",
            "enable-email-otp": "true",
            "enforce-mfa": "false",
            **extra,
        }
    )


@pytest.fixture(params=["sqlite", "postgres"])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    kind: str = request.param
    if kind == "sqlite":
        url = fresh_sqlite_url(tmp_path)
    else:
        url = await trio.to_thread.run_sync(fresh_postgres_url, "outages")
    async with open_storage(StorageConfig(database_type=kind, database_url=url)) as opened:
        memory = Outage(InProcessMemoryStore())
        storage = dataclasses.replace(opened, memory=memory)  # type: ignore[arg-type]
        events = [*(e.value for e in WebhookEvent), *MFA_WEBHOOK_EVENTS.values()]

        def listen(conn: sa.Connection) -> None:
            for event in events:
                webhook_rows.insert_webhook(
                    conn,
                    event_name=event,
                    event_description="",
                    endpoint="http://127.0.0.1:9/hook",
                    enabled=True,
                    headers={},
                    now=0,
                )

        await storage.db.run(listen, write=True)
        yield Site(
            storage=storage,
            memory=memory,
            plain=Runtime.build(_settings(), storage, Metrics()),
            verifying=Runtime.build(
                _settings(**{"enable-email-verification": "true"}), storage, Metrics()
            ),
            totp=Runtime.build(
                _settings(**{"enable-email-otp": "false", "enable-totp-login": "true"}),
                storage,
                Metrics(),
            ),
        )


# -- what the database holds -------------------------------------------------------------------


async def snapshot(site: Site) -> dict[str, list[tuple[Any, ...]]]:
    def read(conn: sa.Connection) -> dict[str, list[tuple[Any, ...]]]:
        return {
            t.name: sorted((tuple(r) for r in conn.execute(sa.select(t)).all()), key=repr)
            for t in TABLES
        }

    return await site.storage.db.run(read)


async def account_record(site: Site, email: str) -> dict[str, Any]:
    """What the database holds for the account, without ids and times: its user row's
    flags, its webhooks, mails, audit actions and pending links, each with its count, and
    its authenticator app (verified, recovery codes left)."""

    def read(conn: sa.Connection) -> dict[str, Any]:
        rows = conn.execute(sa.select(users).where(users.c.email == email)).all()
        ids = {r.id for r in rows}
        webhooks, mails = [], []
        for item in conn.execute(sa.select(outbox)).all():
            payload = json.loads(item.payload)
            if item.kind == "webhook_event" and payload.get("user", {}).get("id") in ids:
                webhooks.append(payload["event_name"])
            elif item.kind == "mail" and payload["to"] == email:
                mails.append(payload["subject"])
        actions = conn.execute(
            sa.select(audit_logs.c.action).where(audit_logs.c.actor_id.in_(ids))
        ).scalars()
        links = conn.execute(
            sa.select(verification_requests.c.identifier).where(
                verification_requests.c.email == email
            )
        ).scalars()
        apps = conn.execute(sa.select(authenticators).where(authenticators.c.user_id.in_(ids)))
        return {
            "users": sorted(
                (
                    r.signup_methods,
                    r.email_verified_at is not None,
                    r.password is not None,
                    r.sessions_valid_after is not None,
                )
                for r in rows
            ),
            "webhooks": sorted(webhooks),
            "mails": sorted(mails),
            "audit": sorted(actions),
            "links": sorted(links),
            "authenticators": sorted(
                (a.verified_at is not None, len(json.loads(a.recovery_codes or "[]"))) for a in apps
            ),
        }

    return await site.storage.db.run(read)


async def queued_mail(site: Site, email: str) -> str:
    """The newest mail queued for ``email``."""

    def read(conn: sa.Connection) -> list[Any]:
        query = sa.select(outbox).where(outbox.c.kind == "mail").order_by(outbox.c.created_at)
        return [json.loads(r.payload) for r in conn.execute(query).all()]

    found = [m for m in await site.storage.db.run(read) if m["to"] == email]
    assert found, f"no mail to {email}"
    return str(found[-1]["html"])


def token_in(html: str) -> str:
    match = re.search(r"token=([A-Za-z0-9._-]+)", html)
    assert match is not None, html
    return match.group(1)


def code_in(html: str) -> str:
    match = re.search(r"<b>(\d{6})</b>", html) or re.search(r"\b(\d{6})\b", html)
    assert match is not None, html
    return match.group(1)


# -- the flows' requests ----------------------------------------------------------------------

Step = Callable[[Site, Browser], Awaitable[object]]


async def signup(site: Site, browser: Browser) -> None:
    request = SignupRequest(email=browser.email, password=PASSWORD, confirm_password=PASSWORD)
    reply = browser.keep(await site.plain.auth.signup(request, browser.caller))
    assert reply.body["access_token"]


async def signup_with_mfa(site: Site, browser: Browser) -> None:
    request = SignupRequest(
        email=browser.email,
        password=PASSWORD,
        confirm_password=PASSWORD,
        is_multi_factor_auth_enabled=True,
    )
    browser.keep(await site.plain.auth.signup(request, browser.caller))


async def signup_to_verify(site: Site, browser: Browser) -> None:
    request = SignupRequest(email=browser.email, password=PASSWORD, confirm_password=PASSWORD)
    reply = browser.keep(await site.verifying.auth.signup(request, browser.caller))
    assert not reply.body.get("access_token")
    browser.token = token_in(await queued_mail(site, browser.email))


async def login(site: Site, browser: Browser) -> None:
    request = LoginRequest(email=browser.email, password=PASSWORD)
    reply = browser.keep(await site.plain.auth.login(request, browser.caller))
    assert reply.body["access_token"]


async def login_for_a_code(site: Site, browser: Browser) -> None:
    request = LoginRequest(email=browser.email, password=PASSWORD)
    reply = browser.keep(await site.plain.auth.login(request, browser.caller))
    assert reply.body["should_show_email_otp_screen"] is True
    browser.code = code_in(await queued_mail(site, browser.email))


async def verify_otp(site: Site, browser: Browser) -> None:
    request = VerifyOtpRequest(email=browser.email, otp=browser.code)
    reply = browser.keep(await site.plain.auth.verify_otp(request, browser.caller))
    assert reply.body["access_token"]


def code_at(secret: str, step: int) -> str:
    return str(pyotp.TOTP(secret).at(step * totp.STEP_SECONDS))


async def enrol_authenticator(site: Site, browser: Browser) -> None:
    """The first login sets the authenticator up; its code for the current step completes
    the enrolment (and signs in)."""
    request = LoginRequest(email=browser.email, password=PASSWORD)
    reply = browser.keep(await site.totp.auth.login(request, browser.caller))
    browser.secret = reply.body["authenticator_secret"]
    browser.recovery_codes = list(reply.body["authenticator_recovery_codes"])
    browser.step = int(time.time()) // totp.STEP_SECONDS
    verify = VerifyOtpRequest(
        email=browser.email, otp=code_at(browser.secret, browser.step), is_totp=True
    )
    assert browser.keep(await site.totp.auth.verify_otp(verify, browser.caller)).body[
        "access_token"
    ]


async def login_for_totp(site: Site, browser: Browser) -> None:
    request = LoginRequest(email=browser.email, password=PASSWORD)
    reply = browser.keep(await site.totp.auth.login(request, browser.caller))
    assert reply.body["should_show_totp_screen"] is True


async def verify_totp(site: Site, browser: Browser) -> None:
    """The code of the step after the enrolment's (accepted within +-1 step of now)."""
    code = code_at(browser.secret, browser.step + 1)
    request = VerifyOtpRequest(email=browser.email, otp=code, is_totp=True)
    reply = browser.keep(await site.totp.auth.verify_otp(request, browser.caller))
    assert reply.body["access_token"]


async def verify_recovery_code(site: Site, browser: Browser) -> None:
    request = VerifyOtpRequest(email=browser.email, otp=browser.recovery_codes[0], is_totp=True)
    reply = browser.keep(await site.totp.auth.verify_otp(request, browser.caller))
    assert reply.body["access_token"]


async def verify_email(site: Site, browser: Browser) -> None:
    request = VerifyEmailRequest(token=browser.token)
    reply = browser.keep(await site.verifying.auth.verify_email(request, browser.caller))
    assert reply.body["access_token"]


async def forgot_password(site: Site, browser: Browser) -> None:
    request = ForgotPasswordRequest(email=browser.email)
    browser.keep(await site.plain.auth.forgot_password(request, browser.caller))


async def magic_link_login(site: Site, browser: Browser) -> None:
    request = MagicLinkLoginRequest(email=browser.email)
    browser.keep(await site.plain.auth.magic_link_login(request, browser.caller))


async def mailed_link(site: Site, browser: Browser) -> None:
    """The queued flow runs from the outbox, the memory store down throughout, and its
    mail carries the link."""
    site.memory.down_from = site.memory.calls + 1
    try:
        # Only queued flows run; the worker gives up on every other item (mail, webhooks),
        # which stays in the outbox for account_record to count.
        worker = OutboxWorker(site.storage.db, site.plain.auth.mailed_links.handlers())
        while await worker.run_once():
            pass
    finally:
        site.memory.down_from = None
    left = await site.storage.db.run(
        lambda c: c.execute(
            sa.select(outbox).where(outbox.c.kind == MAILED_LINK, outbox.c.failed_at.is_(None))
        ).all()
    )
    assert left == []
    browser.token = token_in(await queued_mail(site, browser.email))


async def reset_password(site: Site, browser: Browser) -> None:
    request = ResetPasswordRequest(
        token=browser.token, password=NEW_PASSWORD, confirm_password=NEW_PASSWORD
    )
    browser.keep(await site.plain.auth.reset_password(request, browser.caller))


@dataclass(frozen=True)
class Flow:
    name: str
    #: run before, with the store up
    setup: tuple[Step, ...]
    #: each is run into the outage at each of its memory-store operations (but
    #: :func:`mailed_link`, which runs with the store down throughout)
    requests: tuple[Step, ...]
    #: the account's record afterwards (:func:`account_record`)
    record: dict[str, Any]


def record(
    user: tuple[str, bool, bool, bool],
    webhooks: list[str],
    audit: list[str],
    mails: tuple[str, ...] = (),
    authenticator: tuple[bool, int] | None = None,
) -> dict[str, Any]:
    """``user``: (signup methods, email verified, has a password, sessions ended);
    ``authenticator``: (verified, recovery codes left)."""
    return {
        "users": [user],
        "webhooks": sorted(webhooks),
        "mails": sorted(mails),
        "audit": sorted(audit),
        "links": [],
        "authenticators": [] if authenticator is None else [authenticator],
    }


SIGNED_UP = ["user.created", "user.signup", "user.login"]
#: webhooks and audit actions of a sign-up and two logins with a second factor (the
#: enrolment's and the flow's)
TWO_FACTOR_LOGINS = (
    [*SIGNED_UP, *["user.mfa_challenge_issued", "user.mfa_passed", "user.login"] * 2],
    ["user.signup", *["user.mfa_challenge_issued", "user.mfa_passed", "user.login_success"] * 2],
)
VERIFY_MAIL = "Please verify your email"
FLOWS = [
    Flow(
        "signup",
        (),
        (signup,),
        record(("basic_auth", True, True, False), SIGNED_UP, ["user.signup"]),
    ),
    Flow(
        "login",
        (signup,),
        (login,),
        record(
            ("basic_auth", True, True, False),
            [*SIGNED_UP, "user.login"],
            ["user.signup", "user.login_success"],
        ),
    ),
    Flow(
        "verify_email",
        (),
        (signup_to_verify, verify_email),
        record(
            ("basic_auth", True, True, False),
            SIGNED_UP,
            ["user.signup", "user.email_verified"],
            (VERIFY_MAIL,),
        ),
    ),
    Flow(
        "verify_otp",
        (signup_with_mfa,),
        (login_for_a_code, verify_otp),
        record(
            ("basic_auth", True, True, False),
            [*SIGNED_UP, "user.mfa_challenge_issued", "user.mfa_passed", "user.login"],
            ["user.signup", "user.mfa_challenge_issued", "user.mfa_passed", "user.login_success"],
            ("OTP for your multi factor authentication",),
        ),
    ),
    Flow(
        "verify_otp_authenticator",
        (signup_with_mfa, enrol_authenticator),
        (login_for_totp, verify_totp),
        record(
            ("basic_auth", True, True, False),
            TWO_FACTOR_LOGINS[0],
            TWO_FACTOR_LOGINS[1],
            authenticator=(True, totp.RECOVERY_CODE_COUNT),
        ),
    ),
    Flow(
        "verify_otp_recovery_code",
        (signup_with_mfa, enrol_authenticator),
        (login_for_totp, verify_recovery_code),
        record(
            ("basic_auth", True, True, False),
            TWO_FACTOR_LOGINS[0],
            TWO_FACTOR_LOGINS[1],
            authenticator=(True, totp.RECOVERY_CODE_COUNT - 1),
        ),
    ),
    Flow(
        "reset_password",
        (signup,),
        (forgot_password, mailed_link, reset_password),
        record(
            ("basic_auth", True, True, True),
            SIGNED_UP,
            ["user.signup", "user.forgot_password_requested", "user.password_reset"],
            ("Reset Password",),
        ),
    ),
    Flow(
        "magic_link_login",
        (),
        (magic_link_login, mailed_link, verify_email),
        record(
            # proving the never-verified address ends every other credential (issue 36)
            ("magic_link_login", True, False, True),
            SIGNED_UP,
            ["user.magic_link_requested", "user.email_verified"],
            (VERIFY_MAIL,),
        ),
    ),
]


async def run(site: Site, flow: Flow, email: str, at: tuple[int, int] | None) -> bool:
    """The flow for a new account; with ``at`` = (request, N), that request meets the
    outage at its N-th memory-store operation. Whether it did."""
    browser, memory = Browser(email), site.memory
    for step in flow.setup:
        await step(site, browser)
    reached = False
    for index, request in enumerate(flow.requests):
        if at is None or at[0] != index:
            await request(site, browser)
            continue
        before = await snapshot(site)
        down_from = memory.down_from = memory.calls + at[1]
        try:
            await request(site, browser)
            failed = False
        except StorageUnavailable:
            failed = True
        finally:
            reached = memory.reached
            memory.down_from = None
        if failed:
            operation = memory.names[down_from - 1]
            where = f"{request.__name__} down from operation {at[1]} ({operation})"
            assert await snapshot(site) == before, f"{where}: failed, and wrote"
            try:
                await request(site, browser)  # the identical retry, the store back
            except Exception as exc:
                raise AssertionError(f"{where}: the retry failed") from exc
    return reached


@pytest.mark.parametrize("flow", FLOWS, ids=[f.name for f in FLOWS])
async def test_an_outage_at_any_step_leaves_nothing_or_a_retry_that_succeeds(
    site: Site, flow: Flow
) -> None:
    addresses = (f"outage-{n}@example.com" for n in itertools.count())
    email = next(addresses)
    await run(site, flow, email, None)
    assert await account_record(site, email) == flow.record
    outages = 0
    for index, request in enumerate(flow.requests):
        if request is mailed_link:
            continue
        for n in itertools.count(1):
            email = next(addresses)
            reached = await run(site, flow, email, (index, n))
            assert await account_record(site, email) == flow.record, (request.__name__, n)
            if not reached:
                break
            outages += 1
    assert outages > 0, "the flow never touched the memory store"


async def test_of_two_uses_of_one_link_the_loser_drops_the_session_it_kept(site: Site) -> None:
    """The session is kept before the link is spent (the durable commit last): the request
    that finds the link spent by another, between the two, keeps no session."""
    winner, loser = Browser("race@example.com"), Browser("race@example.com")
    await signup_to_verify(site, winner)
    loser.token, loser.cookies = winner.token, dict(winner.cookies)
    site.memory.interleave = lambda: verify_email(site, winner)  # before the loser's first step
    with pytest.raises(InvalidArgument, match="invalid verification token"):
        await verify_email(site, loser)
    assert site.memory.interleave is None
    user = await site.storage.db.run(lambda c: user_rows.get_by_email(c, "race@example.com"))
    assert user is not None
    (kept,) = await site.verifying.auth.sessions.listing(user.id)
    claims = site.verifying.auth.cookies.open(winner.cookies["cookie_session"])
    assert claims is not None
    assert kept.nonce == claims["nonce"]
    assert await account_record(site, "race@example.com") == FLOWS[2].record


@pytest.mark.parametrize(
    "verify", [verify_totp, verify_recovery_code], ids=["authenticator", "recovery_code"]
)
async def test_of_two_verifies_with_one_code_exactly_one_signs_in(site: Site, verify: Step) -> None:
    """Each on its own challenge, so both takes succeed: the winner signs in between the
    loser's check of the code (against the authenticator it loaded) and the loser's take.
    Only the compare-and-set in the loser's commit can refuse it: "invalid otp", the
    session it kept dropped, its sign-in rolled back, and a failed attempt recorded in
    its place (audit row, webhook, count), as for a replayed code."""
    email = f"race-{verify.__name__}@example.com"
    winner = Browser(email)
    await signup_with_mfa(site, winner)
    await enrol_authenticator(site, winner)
    loser = dataclasses.replace(winner, cookies={})
    for browser in (winner, loser):
        await login_for_totp(site, browser)
    user = await site.storage.db.run(lambda c: user_rows.get_by_email(c, email))
    assert user is not None
    sessions = site.totp.auth.sessions
    kept_before = {s.id for s in await sessions.listing(user.id)}
    before = await account_record(site, email)
    registry = site.totp.metrics.registry

    def counted(outcome: str) -> float:
        labels = {"method": "totp", "outcome": outcome}
        return registry.get_sample_value("bastion_mfa_challenges_total", labels) or 0.0

    counted_before = {outcome: counted(outcome) for outcome in ("passed", "failed")}
    site.memory.interleave_before = "take"
    site.memory.interleave = lambda: verify(site, winner)
    with pytest.raises(InvalidArgument, match="invalid otp"):
        await verify(site, loser)
    assert site.memory.interleave is None, "the winner never ran"
    after = await account_record(site, email)
    signed_in = {  # the winner's sign-in, and the loser's failed attempt
        "webhooks": ["user.login", "user.mfa_passed", "user.mfa_failed"],
        "audit": ["user.login_success", "user.mfa_passed", "user.mfa_failed"],
    }
    assert counted("passed") - counted_before["passed"] == 1
    assert counted("failed") - counted_before["failed"] == 1
    for kind, added in signed_in.items():
        assert collections.Counter(after[kind]) - collections.Counter(before[kind]) == (
            collections.Counter(added)
        ), kind
        assert len(after[kind]) == len(before[kind]) + len(added), kind
    spent = 1 if verify is verify_recovery_code else 0
    assert after["authenticators"] == [(True, totp.RECOVERY_CODE_COUNT - spent)]
    claims = site.totp.auth.cookies.open(winner.cookies["cookie_session"])
    assert claims is not None
    new = [s for s in await sessions.listing(user.id) if s.id not in kept_before]
    assert [s.nonce for s in new] == [claims["nonce"]], "the loser kept its session"
    await login_for_totp(site, loser)
    with pytest.raises(InvalidArgument, match="invalid otp"):  # and the code stays spent
        await verify(site, loser)
