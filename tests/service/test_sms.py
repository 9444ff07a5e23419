"""The SMS client against a local server speaking Twilio's Messages API, alone and on
the outbox (retry on a passing failure, give up on a refusal)."""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from bastion.core.settings import Settings
from bastion.service.outbox import OutboxPolicy, OutboxWorker
from bastion.service.sms import (
    DEFAULT_API_URL,
    SmsClient,
    SmsRejected,
    SmsUnavailable,
    sms_configured,
    sms_handlers,
)
from bastion.storage import Storage, StorageConfig, open_storage, outbox
from bastion.storage.sql.schema import outbox as outbox_table
from tests.dbfixtures import fresh_sqlite_url
from tests.fakes.twilio import ACCOUNT_SID, API_KEY, API_SECRET, FakeTwilio, SpooledTwilio
from tests.server.harness import free_port

SENDER = "+15550001111"
TO = "+15557654321"
BODY = "Your verification code is: 918273"


@pytest.fixture
def twilio() -> Iterator[FakeTwilio]:
    with FakeTwilio() as fake:
        yield fake


def client(fake: FakeTwilio, **overrides: object) -> SmsClient:
    base: dict[str, object] = {
        "account_sid": ACCOUNT_SID,
        "api_key": API_KEY,
        "api_secret": API_SECRET,
        "sender": SENDER,
        "api_url": fake.url + "/",
    }
    return SmsClient(**{**base, **overrides})  # type: ignore[arg-type]


def settings_for(fake: FakeTwilio) -> Settings:
    return Settings(
        sms_account_sid=ACCOUNT_SID,
        sms_api_key=API_KEY,
        sms_api_secret=API_SECRET,
        sms_sender=SENDER,
        sms_api_url=fake.url,
    )


async def test_a_message_is_posted_as_the_api_wants(twilio: FakeTwilio) -> None:
    sent = await client(twilio).send(TO, BODY)
    assert sent.sid.startswith("SM")
    assert len(sent.sid) == 34
    assert sent.status == "queued"
    assert twilio.messages == [
        {"To": TO, "From": SENDER, "Body": BODY, "sid": sent.sid, "account_sid": ACCOUNT_SID}
    ]
    assert twilio.requests == [("POST", f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json", 201)]


def test_the_default_base_url_is_the_providers() -> None:
    sms = SmsClient(account_sid="AC1", api_key="SK1", api_secret="s", sender=SENDER)
    assert sms.url == f"{DEFAULT_API_URL}/2010-04-01/Accounts/AC1/Messages.json"
    assert DEFAULT_API_URL == "https://api.twilio.com"
    with pytest.raises(ValueError, match="account sid"):
        SmsClient(account_sid="", api_key="SK1", api_secret="s", sender=SENDER)


@pytest.mark.parametrize(
    ("overrides", "to", "detail"),
    [
        ({"api_secret": "wrong"}, TO, "HTTP 401: Authenticate (error 20003)"),
        ({"api_key": "SKnope"}, TO, "HTTP 401: Authenticate (error 20003)"),
        ({"account_sid": "AC" + "9" * 32}, TO, "HTTP 404: The requested resource"),
        ({}, "5551234", "HTTP 400: The 'To' number 5551234 is not a valid phone number."),
        ({"sender": ""}, TO, None),
    ],
)
async def test_refusals_are_permanent_and_never_echo_the_body(
    twilio: FakeTwilio, overrides: dict[str, str], to: str, detail: str | None
) -> None:
    if detail is None:  # the client itself refuses to be built without a sender
        with pytest.raises(ValueError, match="sender"):
            client(twilio, **overrides)
        return
    with pytest.raises(SmsRejected) as caught:
        await client(twilio, **overrides).send(to, BODY)
    assert str(caught.value).startswith(detail)
    assert "918273" not in str(caught.value)
    assert twilio.messages == []


async def test_a_missing_body_is_a_refusal(twilio: FakeTwilio) -> None:
    with pytest.raises(SmsRejected, match=r"HTTP 400: Message body is required. \(error 21602\)"):
        await client(twilio).send(TO, "")


@pytest.mark.parametrize(
    ("status", "code", "message"),
    [(429, 20429, "Too Many Requests"), (503, 20503, "Service Unavailable"), (500, 20500, "x")],
)
async def test_overload_and_server_errors_are_retryable(
    twilio: FakeTwilio, status: int, code: int, message: str
) -> None:
    twilio.fail_next(status, code, message)
    with pytest.raises(SmsUnavailable, match=f"HTTP {status}: {message} \\(error {code}\\)"):
        await client(twilio).send(TO, BODY)
    assert twilio.messages == []
    await client(twilio).send(TO, BODY)  # the next attempt goes through
    assert len(twilio.messages) == 1


async def test_no_server_is_retryable() -> None:
    port = free_port()
    sms = SmsClient(
        account_sid=ACCOUNT_SID,
        api_key=API_KEY,
        api_secret=API_SECRET,
        sender=SENDER,
        api_url=f"http://127.0.0.1:{port}",
    )
    with pytest.raises(SmsUnavailable, match="ConnectError"):
        await sms.send(TO, BODY)


async def test_a_silent_server_times_out_as_retryable() -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        sms = SmsClient(
            account_sid=ACCOUNT_SID,
            api_key=API_KEY,
            api_secret=API_SECRET,
            sender=SENDER,
            api_url=f"http://127.0.0.1:{silent.getsockname()[1]}",
            timeout=0.3,
        )
        with pytest.raises(SmsUnavailable):
            await sms.send(TO, BODY)


def test_handlers_only_when_every_provider_flag_is_set(twilio: FakeTwilio) -> None:
    full = settings_for(twilio)
    assert sms_configured(full)
    assert set(sms_handlers(full)) == {"sms"}
    for name in ("sms_account_sid", "sms_api_key", "sms_api_secret", "sms_sender"):
        partial = dataclasses.replace(full, **{name: ""})  # type: ignore[arg-type]
        assert not sms_configured(partial)
        assert sms_handlers(partial) == {}
    assert sms_configured(dataclasses.replace(full, sms_api_url=""))  # it has a default


# -- on the outbox -------------------------------------------------------------------------


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    config = StorageConfig(database_type="sqlite", database_url=fresh_sqlite_url(tmp_path))
    async with open_storage(config) as st:
        yield st


async def _enqueue(st: Storage, payload: dict[str, object]) -> None:
    await st.db.run(lambda c: outbox.enqueue(c, "sms", payload, now=time.time()), write=True)


async def _rows(st: Storage) -> list[sa.Row[tuple[object, ...]]]:
    return await st.db.run(lambda c: list(c.execute(sa.select(outbox_table)).all()))


FAST = OutboxPolicy(backoff_base=0.01, backoff_max=0.01, handler_timeout=5)


async def test_the_outbox_retries_a_passing_failure_then_delivers(
    storage: Storage, twilio: FakeTwilio
) -> None:
    worker = OutboxWorker(storage.db, sms_handlers(settings_for(twilio)), FAST)
    twilio.fail_next(503, 20503, "Service Unavailable")
    await _enqueue(storage, {"to": TO, "body": BODY})
    assert await worker.run_once() == 1
    (row,) = await _rows(storage)
    assert row.failed_at is None
    assert "HTTP 503" in row.last_error
    assert BODY not in row.last_error
    while not twilio.messages:
        await worker.run_once()
    assert [m["Body"] for m in twilio.messages] == [BODY]
    assert await _rows(storage) == []
    assert worker.statistics() == {"delivered": 1, "retried": 1, "failed": 0}


async def test_the_outbox_gives_up_on_a_refused_number(
    storage: Storage, twilio: FakeTwilio
) -> None:
    worker = OutboxWorker(storage.db, sms_handlers(settings_for(twilio)), FAST)
    await _enqueue(storage, {"to": "not-a-number", "body": BODY})
    await worker.run_once()
    (row,) = await _rows(storage)
    assert row.failed_at is not None
    assert "21211" in row.last_error
    assert await worker.run_once() == 0
    assert twilio.messages == []


def test_the_standalone_fake_spools_each_message(tmp_path: Path) -> None:
    import httpx

    with SpooledTwilio(free_port(), tmp_path / "sms") as spooled:
        answer = httpx.post(
            f"{spooled.url}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json",
            data={"To": TO, "From": SENDER, "Body": BODY},
            auth=(API_KEY, API_SECRET),
        )
        assert answer.status_code == 201
        refused = httpx.post(
            f"{spooled.url}/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json",
            data={"To": TO, "From": SENDER, "Body": BODY},
            auth=(API_KEY, "wrong"),
        )
        assert refused.status_code == 401
        assert refused.json() == {
            "code": 20003,
            "message": "Authenticate",
            "more_info": "https://www.twilio.com/docs/errors/20003",
            "status": 401,
        }
        (message,) = spooled.wait_for(1)
        assert message == {
            "sid": answer.json()["sid"],
            "account_sid": ACCOUNT_SID,
            "To": TO,
            "From": SENDER,
            "Body": BODY,
        }


async def test_the_runtime_registers_sms_on_the_outbox(
    storage: Storage, twilio: FakeTwilio
) -> None:
    from bastion.service.runtime import _outbox_handlers

    assert "sms" in _outbox_handlers(settings_for(twilio), storage)
    assert "sms" not in _outbox_handlers(Settings(), storage)
