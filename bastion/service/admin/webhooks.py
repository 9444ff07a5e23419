"""Webhook administration: add, update, delete, get, list, logs, test_endpoint.

``event_name`` is stored and returned exactly as registered (Authorizer appended
``-<unix time>``; bastion drops that, so several webhooks per event are simply rows).
Each change writes its audit row in its own transaction.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from bastion.core.errors import FailedPrecondition, InvalidArgument, NotFound
from bastion.service.access import Service
from bastion.service.admin.audit import record_admin_action
from bastion.service.admin.delivery import DeliveryError, WebhookSender
from bastion.service.admin.events import WEBHOOK_EVENTS, default_description
from bastion.service.admin.requests import (
    AddWebhookRequest,
    IdRequest,
    ListRequest,
    TestEndpointRequest,
    UpdateWebhookRequest,
    WebhookLogsRequest,
)
from bastion.service.admin.targets import RefusedTarget, check_saved_endpoint
from bastion.service.context import CallerContext, Reply
from bastion.storage import Storage, webhooks

__all__ = ["WebhookAdmin"]


def _event_name(value: str | None) -> str:
    if value not in WEBHOOK_EVENTS:
        raise InvalidArgument(f"invalid event name {value or ''}")
    return value


def _required_id(request: IdRequest | UpdateWebhookRequest) -> str:
    webhook_id = request.id
    if not webhook_id:
        raise InvalidArgument("webhook ID required")
    return webhook_id


def _test_user() -> dict[str, Any]:
    now = int(time.time())
    return {
        "id": str(uuid.uuid4()),
        "email": "test_endpoint@authorizer.dev",
        "email_verified": True,
        "signup_methods": "magic_link_login",
        "given_name": "Foo",
        "family_name": "Bar",
        "roles": ["user"],
        "created_at": now,
        "updated_at": now,
    }


class WebhookAdmin:
    def __init__(self, service: Service, storage: Storage, sender: WebhookSender) -> None:
        self._service = service
        self._db = storage.db
        self._listeners = storage.webhook_listeners
        self._sender = sender

    async def _endpoint(self, value: str | None) -> str:
        """A checked endpoint: scheme and host, and (unless private targets are allowed)
        what the host resolves to NOW; delivery checks again at every attempt."""
        if not value or not value.strip():
            raise InvalidArgument("empty endpoint not allowed")
        try:
            await check_saved_endpoint(value, allow_private=self._sender.allow_private_targets)
        except RefusedTarget as exc:
            raise InvalidArgument(f"invalid endpoint: {exc}") from None
        return value.strip()

    async def add_webhook(self, request: AddWebhookRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        event_name = _event_name(request.event_name)
        endpoint = await self._endpoint(request.endpoint)
        description = request.event_description or default_description(event_name)
        enabled = request.enabled or False
        headers = request.headers or {}
        now = int(time.time())

        def add(conn: Any) -> str:
            webhook_id = webhooks.insert_webhook(
                conn,
                event_name=event_name,
                event_description=description,
                endpoint=endpoint,
                enabled=enabled,
                headers=headers,
                now=now,
            )
            record_admin_action(
                conn,
                caller,
                "admin.webhook_created",
                resource_type="webhook",
                resource_id=webhook_id,
                metadata={"event_name": event_name},
            )
            return webhook_id

        await self._db.run(add, write=True)
        self._listeners.forget()
        return Reply({"message": "Webhook added successfully"})

    async def update_webhook(self, request: UpdateWebhookRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        webhook_id = _required_id(request)
        changes: dict[str, Any] = {}
        if (event_name := request.event_name) is not None:
            changes["event_name"] = _event_name(event_name)
        if (description := request.event_description) is not None:
            changes["event_description"] = description
        if (endpoint := request.endpoint) is not None:
            changes["endpoint"] = await self._endpoint(endpoint)
        if (enabled := request.enabled) is not None:
            changes["enabled"] = enabled
        if (headers := request.headers) is not None:
            changes["headers"] = headers
        now = int(time.time())

        def update(conn: Any) -> bool:
            if not webhooks.update_webhook(conn, webhook_id, changes, now=now):
                return False
            record_admin_action(
                conn,
                caller,
                "admin.webhook_updated",
                resource_type="webhook",
                resource_id=webhook_id,
                metadata={"fields": sorted(changes)},
            )
            return True

        if not await self._db.run(update, write=True):
            raise NotFound("webhook not found")
        self._listeners.forget()
        return Reply({"message": "Webhook updated successfully."})

    async def delete_webhook(self, request: IdRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        webhook_id = _required_id(request)

        def delete(conn: Any) -> bool:
            if not webhooks.delete_webhook(conn, webhook_id):
                return False
            record_admin_action(
                conn,
                caller,
                "admin.webhook_deleted",
                resource_type="webhook",
                resource_id=webhook_id,
            )
            return True

        if not await self._db.run(delete, write=True):
            raise NotFound("webhook not found")
        self._listeners.forget()
        return Reply({"message": "Webhook deleted successfully"})

    async def webhook(self, request: IdRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        webhook_id = _required_id(request)
        found = await self._db.run(lambda c: webhooks.get_webhook(c, webhook_id))
        if found is None:
            raise NotFound("webhook not found")
        return Reply(found)

    async def webhooks(self, request: ListRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        page = request.pagination
        rows, total = await self._db.run(
            lambda c: webhooks.list_webhooks(c, offset=page.offset, limit=page.limit)
        )
        return Reply({"webhooks": rows, "pagination": page.describe(total)})

    async def webhook_logs(self, request: WebhookLogsRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        page = request.pagination
        webhook_id = request.webhook_id or None
        rows, total = await self._db.run(
            lambda c: webhooks.list_logs(
                c, webhook_id=webhook_id, offset=page.offset, limit=page.limit
            )
        )
        return Reply({"webhook_logs": rows, "pagination": page.describe(total)})

    async def test_endpoint(self, request: TestEndpointRequest, caller: CallerContext) -> Reply:
        """POST a sample event (signed like a real delivery) and report the answer."""
        await self._service.require_admin(caller)
        name = request.event_name
        if name not in WEBHOOK_EVENTS:
            raise InvalidArgument(f"invalid event_name {name or ''}")
        endpoint = await self._endpoint(request.endpoint)
        description = request.event_description or default_description(name)
        payload: dict[str, Any] = {
            "event_name": name,
            "event_description": description,
            "user": _test_user(),
            "auth_recipe": "magic_link_login" if name in {"user.login", "user.signup"} else "",
        }
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = self._sender.headers(body, request.headers or {}, None)
        await self._db.run(
            lambda c: record_admin_action(
                c,
                caller,
                "admin.webhook_tested",
                resource_type="webhook",
                resource_id="",
                metadata={"event_name": name},
            ),
            write=True,
        )
        try:
            answer = await self._sender.post(endpoint, body, headers)
        except RefusedTarget as exc:
            raise InvalidArgument(f"invalid endpoint: {exc}") from None
        except DeliveryError as exc:
            raise FailedPrecondition(f"endpoint unreachable: {exc}") from None
        return Reply({"http_status": answer.http_status, "response": answer.response})
