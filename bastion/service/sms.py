"""Text messages through the SMS provider's HTTP messages API (Twilio's).

One call per message: ``POST {api_url}/2010-04-01/Accounts/{AccountSid}/Messages.json``
with the form fields ``To``, ``From`` and ``Body``, authenticated with HTTP Basic (API key
SID + secret). ``--sms-api-url`` points it elsewhere (a regional edge, a test server);
the default is the provider's public API.

Sending runs on the outbox (kind ``sms``), which retries: a failure that may pass (no
answer, a timeout, 429, a 5xx) raises :class:`SmsUnavailable` and is tried again later;
one that cannot (a refused number, bad credentials: any other 4xx) raises
:class:`SmsRejected`, a :class:`~service.outbox.PermanentFailure`. Error texts carry
the provider's error code and message, never the message body (it holds the code).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from bastion.core.settings import Settings
from bastion.service.outbox import Handler, PermanentFailure
from bastion.storage.outbox import OutboxItem

__all__ = [
    "DEFAULT_API_URL",
    "SEND_TIMEOUT_SECONDS",
    "SentMessage",
    "SmsClient",
    "SmsRejected",
    "SmsUnavailable",
    "sms_configured",
    "sms_handlers",
]

log = logging.getLogger("bastion.sms")

DEFAULT_API_URL = "https://api.twilio.com"
API_VERSION = "2010-04-01"
#: One attempt, from connecting to the last byte of the answer.
SEND_TIMEOUT_SECONDS = 10.0
_MAX_ERROR_TEXT = 300


class SmsUnavailable(Exception):
    """No usable answer, or one worth retrying (429, 5xx)."""


class SmsRejected(PermanentFailure):
    """The provider refused the message for good (bad number, bad credentials ...)."""


@dataclass(frozen=True, slots=True)
class SentMessage:
    #: the provider's message id (``SM...``)
    sid: str
    #: its first status, e.g. ``queued``
    status: str


class SmsClient:
    def __init__(
        self,
        *,
        account_sid: str,
        api_key: str,
        api_secret: str,
        sender: str,
        api_url: str = "",
        timeout: float = SEND_TIMEOUT_SECONDS,
    ) -> None:
        if not (account_sid and api_key and api_secret and sender):
            raise ValueError("the SMS client needs an account sid, API key, secret and sender")
        base = (api_url or DEFAULT_API_URL).rstrip("/")
        self.url = f"{base}/{API_VERSION}/Accounts/{account_sid}/Messages.json"
        self.sender = sender
        self.timeout = timeout
        self._auth = httpx.BasicAuth(api_key, api_secret)

    @classmethod
    def from_settings(cls, settings: Settings) -> SmsClient:
        return cls(
            account_sid=settings.sms_account_sid,
            api_key=settings.sms_api_key,
            api_secret=settings.sms_api_secret,
            sender=settings.sms_sender,
            api_url=settings.sms_api_url,
        )

    async def send(self, to: str, body: str) -> SentMessage:
        """Send one message; raises :class:`SmsUnavailable` or :class:`SmsRejected`."""
        form = {"To": to, "From": self.sender, "Body": body}
        try:
            with trio.fail_after(self.timeout):
                async with httpx.AsyncClient(
                    trust_env=False, follow_redirects=False, timeout=self.timeout
                ) as client:
                    response = await client.post(self.url, data=form, auth=self._auth)
        except trio.TooSlowError:
            raise SmsUnavailable(f"no answer within {self.timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise SmsUnavailable(f"{type(exc).__name__}: {exc}") from None
        return _settle(response)


def _settle(response: httpx.Response) -> SentMessage:
    status = response.status_code
    payload = _json(response)
    if 200 <= status < 300:
        sid, state = payload.get("sid"), payload.get("status")
        if not isinstance(sid, str) or not sid:
            raise SmsUnavailable(f"HTTP {status} without a message sid")
        return SentMessage(sid=sid, status=state if isinstance(state, str) else "")
    detail = _describe(status, payload, response.text)
    if status == 429 or status >= 500:
        raise SmsUnavailable(detail)
    raise SmsRejected(detail)


def _json(response: httpx.Response) -> Mapping[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _describe(status: int, payload: Mapping[str, Any], text: str) -> str:
    code, message = payload.get("code"), payload.get("message")
    if isinstance(message, str) and message:
        detail = f"{message} (error {code})" if code is not None else message
    else:
        detail = text.strip() or "no body"
    return f"HTTP {status}: {detail[:_MAX_ERROR_TEXT]}"


def sms_configured(settings: Settings) -> bool:
    """Every provider flag is set (the API URL has a default)."""
    return bool(
        settings.sms_account_sid
        and settings.sms_api_key
        and settings.sms_api_secret
        and settings.sms_sender
    )


def sms_handlers(settings: Settings) -> dict[str, Handler]:
    """The outbox handler for ``sms`` items (``{"to", "body"}``), when SMS is configured."""
    if not sms_configured(settings):
        return {}
    client = SmsClient.from_settings(settings)

    async def send_sms(item: OutboxItem) -> None:
        sent = await client.send(str(item.payload["to"]), str(item.payload["body"]))
        log.info("sms sent", extra={"item": item.id, "sid": sent.sid, "status": sent.status})

    return {"sms": send_sms}
