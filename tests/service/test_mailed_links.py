"""Requests that mail a link do the same work for every address (second security battery):
the answer comes before anything that depends on the account, which runs from the outbox.

Timing cannot be asserted in a test; what makes it equal can: before the outbox runs, a
known and an unknown address leave exactly the same trace (one queued item each, no link
stored, no mail queued) and get byte-identical answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import trio

from bastion.core.errors import InvalidArgument
from bastion.core.settings import settings_from_flags
from bastion.core.state_machines.oauth_authorize_effects import RedirectToLogin
from bastion.service.auth.requests import (
    ForgotPasswordRequest,
    MagicLinkLoginRequest,
    ProfileRequest,
    ResendVerifyEmailRequest,
    SignupRequest,
    VerifyEmailRequest,
)
from bastion.service.context import CallerContext, Protocol, Reply
from bastion.service.metrics import Metrics
from bastion.service.runtime import Runtime
from bastion.storage import StorageConfig, open_storage
from bastion.storage.sql.schema import outbox, users, verification_requests
from tests.dbfixtures import fresh_postgres_url, fresh_sqlite_url
from tests.server.test_oauth_flow import pkce
from tests.service.flags import QUEUED_MAIL, REQUIRED
from tests.service.test_flow_outages import token_in

PASSWORD = "Mailed!links1"
CALLER = CallerContext(protocol=Protocol.REST, client_ip="192.0.2.7", user_agent="test")


@dataclass
class Site:
    runtime: Runtime
    #: the flags the runtime was built from
    flags: dict[str, str]

    async def rows(self, table: sa.Table) -> list[Any]:
        return await self.runtime.storage.db.run(lambda c: c.execute(sa.select(table)).all())

    async def links(self, identifier: str) -> list[Any]:
        return [r for r in await self.rows(verification_requests) if r.identifier == identifier]

    async def queued(self) -> list[str]:
        return sorted(row.kind for row in await self.rows(outbox))

    async def drain(self) -> None:
        """Run the outbox until it has nothing due (mail has nowhere to go: it stays)."""
        await self.runtime.outbox.run_once()

    async def clear_outbox(self) -> None:
        await self.runtime.storage.db.run(lambda c: c.execute(outbox.delete()), write=True)


@pytest.fixture(params=["sqlite", "postgres"])
async def site(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Site]:
    if request.param == "sqlite":
        url = fresh_sqlite_url(tmp_path)
    else:
        url = await trio.to_thread.run_sync(fresh_postgres_url, "mailed")
    flags = {
        **REQUIRED,
        **QUEUED_MAIL,
        "database-type": request.param,
        "database-url": url,
        "enable-magic-link-login": "true",
        "enable-email-verification": "true",
    }
    config = StorageConfig(database_type=request.param, database_url=url)
    async with open_storage(config) as storage:
        yield Site(Runtime.build(settings_from_flags(flags), storage, Metrics()), flags)


async def known_address(site: Site) -> str:
    email = "known@example.com"
    signup = SignupRequest(email=email, password=PASSWORD, confirm_password=PASSWORD)
    await site.runtime.auth.signup(signup, CALLER)
    await site.clear_outbox()
    return email


def same_answer(one: Reply, other: Reply) -> None:
    assert one.body == other.body
    assert one.cookies == other.cookies


async def test_forgot_password_answers_before_it_looks_the_address_up(site: Site) -> None:
    known = await known_address(site)
    auth = site.runtime.auth
    for_known = await auth.forgot_password(ForgotPasswordRequest(email=known), CALLER)
    assert await site.queued() == ["mailed_link"]
    assert await site.links("forgot_password") == []
    await site.clear_outbox()
    unknown = ForgotPasswordRequest(email="nobody@example.com")
    same_answer(for_known, await auth.forgot_password(unknown, CALLER))
    assert await site.queued() == ["mailed_link"]
    # The queued flows run: the known address gets its link, the unknown one nothing.
    await site.drain()
    assert await site.queued() == []
    await site.clear_outbox()
    await auth.forgot_password(ForgotPasswordRequest(email=known), CALLER)
    await site.drain()
    (stored,) = await site.links("forgot_password")
    assert stored.email == known
    assert await site.queued() == ["mail"]


async def test_resend_verify_email_answers_alike_and_sends_from_the_outbox(site: Site) -> None:
    known = await known_address(site)
    auth = site.runtime.auth
    asks = [
        ResendVerifyEmailRequest(email=address, identifier="basic_auth_signup")
        for address in (known, "nobody@example.com")
    ]
    answers = [await auth.resend_verify_email(ask, CALLER) for ask in asks]
    same_answer(*answers)
    assert await site.queued() == ["mailed_link", "mailed_link"]
    await site.drain()
    # Only the pending sign-up was mailed again.
    assert await site.queued() == ["mail"]


async def test_magic_link_for_a_new_address_makes_the_account_only_from_the_outbox(
    site: Site,
) -> None:
    known = await known_address(site)
    auth = site.runtime.auth
    new = "new@example.com"
    answers = [
        await auth.magic_link_login(MagicLinkLoginRequest(email=address), CALLER)
        for address in (known, new)
    ]
    same_answer(*answers)
    assert [row.email for row in await site.rows(users)] == [known]
    await site.drain()
    assert sorted(row.email for row in await site.rows(users)) == [known, new]
    assert await site.queued() == ["mail", "mail"]


async def test_refusals_that_hold_for_every_address_come_at_once(site: Site) -> None:
    with pytest.raises(InvalidArgument):
        await site.runtime.auth.forgot_password(ForgotPasswordRequest(email="not-an-email"), CALLER)
    assert await site.queued() == []


class SteppingClock:
    """The system's time, one second later at every reading."""

    def __init__(self) -> None:
        self.readings = 0

    def now(self) -> float:
        self.readings += 1
        return time.time() + self.readings


async def test_the_session_a_link_signs_in_survives_the_marker_written_a_second_later(
    site: Site,
) -> None:
    """A sign-up link followed elsewhere ends every other session of the account and keeps
    the one it signs in, even when the clock passes a second between minting that session
    and writing the "sessions valid after" marker (a slow host did: the marker refused the
    kept session's tokens, issued a second earlier)."""
    email = "elsewhere@example.com"
    signup = SignupRequest(email=email, password=PASSWORD, confirm_password=PASSWORD)
    auth = site.runtime.auth
    await auth.signup(signup, CALLER)
    (mail,) = [m for m in await site.rows(outbox) if m.kind == "mail"]
    token = token_in(json.loads(mail.payload)["html"])
    clock, system = SteppingClock(), auth.clock
    auth.clock = clock
    stranger = CallerContext(protocol=Protocol.REST, client_ip="198.51.100.9")
    verified = await auth.verify_email(VerifyEmailRequest(token=token), stranger)
    assert clock.readings >= 2  # minted, then the marker: a second apart at least
    auth.clock = system
    bearer = str(verified.body["access_token"])
    caller = CallerContext(protocol=Protocol.REST, client_ip="198.51.100.9", bearer_token=bearer)
    profile = await auth.profile(ProfileRequest(), caller)
    assert profile.body["email"] == email
    assert profile.body["email_verified"] is True


async def test_an_authorize_code_a_magic_link_binds_survives_the_marker_a_second_later(
    site: Site,
) -> None:
    """A magic link that lands with an authorize ``state`` binds the announced code to the
    session it signs in, and ends the account's other sessions (the link proves the
    address to whoever asked for it). The code's authentication time is the session's
    minting time: with the clock a second later at every reading, the "sessions valid
    after" marker must refuse neither the session nor the code (the code once took an
    earlier reading, and a slow second in CI made its redemption invalid_grant)."""
    auth, oauth = site.runtime.auth, site.runtime.oauth
    redirect_uri = f"{site.flags['url']}/done"
    verifier, challenge = pkce()
    params = {
        "client_id": site.flags["client-id"],
        "redirect_uri": redirect_uri,
        "response_type": "code",
        "state": "state-of-the-app",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    announced = await oauth.authorize(params, CALLER)
    assert isinstance(announced, RedirectToLogin)  # to the login page, the code announced
    code = dict(announced.params)["code"]
    email = "landing@example.com"
    await auth.magic_link_login(MagicLinkLoginRequest(email=email, state=params["state"]), CALLER)
    await site.drain()  # the account, then its mail
    (mail,) = [m for m in await site.rows(outbox) if m.kind == "mail"]
    token = token_in(json.loads(mail.payload)["html"])
    clock, system = SteppingClock(), auth.clock
    auth.clock = clock
    landed = await auth.verify_email(VerifyEmailRequest(token=token, state=params["state"]), CALLER)
    assert clock.readings >= 2
    auth.clock = system
    assert landed.body["access_token"]
    form = {"code": code, "redirect_uri": redirect_uri, "code_verifier": verifier}
    redeemed = await oauth.redeem(form, CALLER, client_authenticated=None)
    assert redeemed.body["access_token"]


async def test_a_queued_link_is_the_requesters_whichever_process_claims_it(site: Site) -> None:
    """Another member of the fleet claims the queued flow while its flags differ (a
    rolling change: another --url and organisation, magic links off): the mail carries
    the link the caller was answered for, on the requester's URL, in its name."""
    known = await known_address(site)
    flags = {
        **site.flags,
        "url": "http://elsewhere.example",
        "enable-magic-link-login": "false",
        "organization-name": "Other Org",
    }
    other = Runtime.build(settings_from_flags(flags), site.runtime.storage, Metrics())
    await site.runtime.auth.magic_link_login(MagicLinkLoginRequest(email=known), CALLER)
    await other.outbox.run_once()
    (mail,) = [m for m in await site.rows(outbox) if m.kind == "mail"]
    html = json.loads(mail.payload)["html"]
    assert "http://127.0.0.1:9/" in html, html
    assert "elsewhere" not in html, html
    assert site.runtime.settings.organization_name in html, html
    assert "Other Org" not in html, html
