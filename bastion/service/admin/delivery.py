"""Webhook delivery on the outbox, signed, with every attempt logged.

Two outbox kinds:

- ``webhook_event`` (enqueued by the flows: ``{event_name, user, auth_recipe}``) fans out,
  in ONE transaction, into a ``webhook_delivery`` item per enabled webhook registered for
  the event, and removes itself in that same transaction, so a crash can neither lose
  the event nor deliver it twice to the same webhook.
- ``webhook_delivery`` POSTs the event to one webhook. The outbox worker retries it with
  exponential backoff up to its bounded number of attempts; a refused target fails it
  for good. Every attempt writes a ``service_webhook_logs`` row (status 0 when no HTTP
  answer came back).

The request: JSON ``{webhook_id, event_name, event_description, user, auth_recipe,
idempotency_key, created_at}``; ``idempotency_key`` (also the
``X-Authorizer-Idempotency-Key`` header) is the delivery item's id, the same on every
retry. ``X-Authorizer-Timestamp`` is the attempt's Unix time and
``X-Authorizer-Signature`` is hex HMAC-SHA256, keyed with ``--client-secret``, of
``<timestamp>.<body>``: a receiver recomputes it, compares in constant time and refuses
old timestamps and seen keys, which defeats replays.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import trio

from bastion.service import tracing
from bastion.service.admin.targets import RefusedTarget, Target, UnresolvableTarget, resolve_target
from bastion.service.outbox import Handler, PermanentFailure
from bastion.storage import outbox, webhooks
from bastion.storage.outbox import OutboxItem
from bastion.storage.sql.database import Database

__all__ = [
    "DELIVERY_TIMEOUT_SECONDS",
    "SIGNATURE_HEADER",
    "WebhookSender",
    "sign",
    "webhook_handlers",
]

log = logging.getLogger("bastion.webhooks")

SIGNATURE_HEADER = "X-Authorizer-Signature"
TIMESTAMP_HEADER = "X-Authorizer-Timestamp"
IDEMPOTENCY_HEADER = "X-Authorizer-Idempotency-Key"
#: One attempt, from resolving the host to the last byte of the answer.
DELIVERY_TIMEOUT_SECONDS = 10.0
#: How much of a receiver's answer is read and logged.
MAX_RESPONSE_BYTES = 64 * 1024


def sign(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Answer:
    #: 0 when no HTTP answer came back (refused, unreachable, timed out).
    http_status: int
    response: str


class DeliveryError(Exception):
    """No usable answer; the attempt is logged and the outbox tries again later."""


class WebhookSender:
    """POSTs signed JSON to a checked target (see :mod:`service.admin.targets`)."""

    def __init__(
        self,
        client_secret: str,
        *,
        allow_private_targets: bool,
        timeout: float = DELIVERY_TIMEOUT_SECONDS,
    ) -> None:
        self._secret = client_secret
        self.allow_private_targets = allow_private_targets
        self.timeout = timeout

    def headers(self, body: bytes, extra: Mapping[str, str], key: str | None) -> dict[str, str]:
        timestamp = int(time.time())
        headers = {name: value for name, value in extra.items() if isinstance(value, str)}
        headers.update(
            {
                "Content-Type": "application/json",
                "User-Agent": "bastion-webhooks",
                TIMESTAMP_HEADER: str(timestamp),
                SIGNATURE_HEADER: sign(self._secret, timestamp, body),
            }
        )
        if key is not None:
            headers[IDEMPOTENCY_HEADER] = key
        return headers

    async def post(self, endpoint: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        """One attempt. Raises RefusedTarget, or DeliveryError when nothing answered."""
        try:
            with trio.fail_after(self.timeout):
                target = await resolve_target(endpoint, allow_private=self.allow_private_targets)
                return await self._send(target, body, headers)
        except trio.TooSlowError:
            raise DeliveryError(f"no answer within {self.timeout:g}s") from None
        except UnresolvableTarget as exc:
            raise DeliveryError(str(exc)) from None
        except httpx.HTTPError as exc:
            raise DeliveryError(f"{type(exc).__name__}: {exc}") from None

    async def _send(self, target: Target, body: bytes, headers: Mapping[str, str]) -> Answer:
        extensions = {}
        if target.tls_server_name is not None:
            extensions["sni_hostname"] = target.tls_server_name
        async with httpx.AsyncClient(trust_env=False, follow_redirects=False) as client:
            request = client.build_request(
                "POST",
                target.url,
                content=body,
                headers={**headers, "Host": target.host_header},
                extensions=extensions,
            )
            response = await client.send(request, stream=True)
            try:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size >= MAX_RESPONSE_BYTES:
                        break
            finally:
                await response.aclose()
        text = b"".join(chunks)[:MAX_RESPONSE_BYTES].decode("utf-8", errors="replace")
        return Answer(response.status_code, text)


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class WebhookDelivery:
    """The outbox handlers of the two webhook kinds."""

    def __init__(self, db: Database, sender: WebhookSender) -> None:
        self._db = db
        self._sender = sender

    async def fan_out(self, item: OutboxItem) -> None:
        event = item.payload
        now = time.time()

        def enqueue_deliveries(conn: Any) -> int:
            hooks = webhooks.enabled_for_event(conn, str(event.get("event_name", "")))
            for hook in hooks:
                outbox.enqueue(
                    conn,
                    "webhook_delivery",
                    {
                        "webhook_id": hook["id"],
                        "event_name": event.get("event_name", ""),
                        "user": event.get("user") or {},
                        "auth_recipe": event.get("auth_recipe") or "",
                        "created_at": item.created_at,
                    },
                    now=now,
                )
            # Settled here, in the same transaction: a crash after this commit must not
            # fan the event out a second time.
            outbox.complete(conn, item.id)
            return len(hooks)

        await self._db.run(enqueue_deliveries, write=True)

    async def deliver(self, item: OutboxItem) -> None:
        payload = item.payload
        hook = await self._db.run(lambda c: webhooks.get_webhook(c, str(payload["webhook_id"])))
        if hook is None or not hook["enabled"]:
            return  # deleted or disabled since the event: nothing left to deliver to
        body = _json(
            {
                "webhook_id": hook["id"],
                "event_name": payload["event_name"],
                "event_description": hook["event_description"],
                "user": payload.get("user") or {},
                "auth_recipe": payload.get("auth_recipe") or "",
                "idempotency_key": item.id,
                "created_at": payload.get("created_at", item.created_at),
            }
        )
        headers = self._sender.headers(body, hook["headers"], item.id)
        try:
            with tracing.span("webhook POST", {"webhook.id": hook["id"]}, client=True) as span:
                tracing.inject(headers)  # the receiver's spans join this delivery's trace
                answer = await self._sender.post(hook["endpoint"], body, headers)
                if span is not None:
                    span.set_attribute("http.response.status_code", answer.http_status)
        except RefusedTarget as exc:
            await self._log(hook["id"], body, Answer(0, _error(f"refused target: {exc}")))
            raise PermanentFailure(f"refused target: {exc}") from None
        except DeliveryError as exc:
            await self._log(hook["id"], body, Answer(0, _error(str(exc))))
            raise
        await self._log(hook["id"], body, answer)
        if not 200 <= answer.http_status < 300:
            raise DeliveryError(f"the receiver answered HTTP {answer.http_status}")

    async def _log(self, webhook_id: str, body: bytes, answer: Answer) -> None:
        now = int(time.time())
        await self._db.run(
            lambda c: webhooks.insert_log(
                c,
                webhook_id=webhook_id,
                http_status=answer.http_status,
                request=body.decode(),
                response=answer.response,
                now=now,
            ),
            write=True,
        )


def _error(message: str) -> str:
    return json.dumps({"error": message})


def webhook_handlers(db: Database, sender: WebhookSender) -> dict[str, Handler]:
    delivery = WebhookDelivery(db, sender)
    return {"webhook_event": delivery.fan_out, "webhook_delivery": delivery.deliver}
