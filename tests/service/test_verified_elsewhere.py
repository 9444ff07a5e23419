"""A sign-up link followed elsewhere ends every other session of the account and keeps the
one it signs in, even when the clock passes a second between minting that session and
writing the "sessions valid after" marker (a slow host did: the marker refused the kept
session's tokens, issued a second earlier)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from bastion.core.settings import settings_from_flags
from bastion.service.auth.requests import ProfileRequest, SignupRequest, VerifyEmailRequest
from bastion.service.context import CallerContext, Protocol
from bastion.service.metrics import Metrics
from bastion.service.runtime import Runtime
from bastion.storage import StorageConfig, open_storage
from tests.dbfixtures import fresh_sqlite_url
from tests.service.test_flow_outages import Site, queued_mail, token_in

PASSWORD = "Elsewhere!pass1"


class SteppingClock:
    """The system's time, one second later at every reading."""

    def __init__(self) -> None:
        self.readings = 0

    def now(self) -> float:
        self.readings += 1
        return time.time() + self.readings


async def test_the_session_a_link_signs_in_survives_the_marker_written_a_second_later(
    tmp_path: Path,
) -> None:
    settings = settings_from_flags(
        {
            "admin-secret": "a",
            "client-id": "client-1",
            "client-secret": "client-secret-1",
            "database-type": "sqlite",
            "database-url": fresh_sqlite_url(tmp_path),
            "jwt-type": "HS256",
            "jwt-secret": "jwt-secret-of-some-length",
            "url": "http://127.0.0.1:9",
            "smtp-host": "127.0.0.1",
            "smtp-port": "9",
            "smtp-sender-email": "bastion@example.com",
            "enable-email-verification": "true",
        }
    )
    email = "elsewhere@example.com"
    config = StorageConfig(database_type="sqlite", database_url=settings.database_url)
    async with open_storage(config) as storage:
        runtime = Runtime.build(settings, storage, Metrics())
        signer = CallerContext(protocol=Protocol.REST, client_ip="192.0.2.7")
        signup = SignupRequest(email=email, password=PASSWORD, confirm_password=PASSWORD)
        await runtime.auth.signup(signup, signer)
        outbox_reader = cast(Site, SimpleNamespace(storage=storage))  # what queued_mail reads
        token = token_in(await queued_mail(outbox_reader, email))
        clock, system = SteppingClock(), runtime.auth.clock
        runtime.auth.clock = clock
        stranger = CallerContext(protocol=Protocol.REST, client_ip="198.51.100.9")
        verified = await runtime.auth.verify_email(VerifyEmailRequest(token=token), stranger)
        assert clock.readings >= 2  # minted, then the marker: a second apart at least
        bearer = str(verified.body["access_token"])
        runtime.auth.clock = system
        caller = CallerContext(
            protocol=Protocol.REST, client_ip="198.51.100.9", bearer_token=bearer
        )
        profile = await runtime.auth.profile(ProfileRequest(), caller)
    assert profile.body["email"] == email
    assert profile.body["email_verified"] is True
