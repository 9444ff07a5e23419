"""Email template administration (the lookup that lets a saved template replace the
built-in mail of its event is :func:`service.auth.mail.render_admin_template`).

Templates are checked when saved (:func:`core.templating.compile_template`): a broken or
overreaching one is refused with the reason, so sending mail never meets one.
"""

from __future__ import annotations

import time
from typing import Any

from bastion.core.errors import AlreadyExists, InvalidArgument, NotFound
from bastion.core.templating import TemplateSyntaxError, compile_template
from bastion.service.access import Service
from bastion.service.admin.audit import record_admin_action
from bastion.service.admin.events import EMAIL_TEMPLATE_EVENTS
from bastion.service.admin.requests import (
    AddEmailTemplateRequest,
    IdRequest,
    ListRequest,
    UpdateEmailTemplateRequest,
)
from bastion.service.context import CallerContext, Reply
from bastion.storage import Storage, email_templates

__all__ = ["EmailTemplateAdmin"]


def _event_name(value: str | None) -> str:
    if value not in EMAIL_TEMPLATE_EVENTS:
        raise InvalidArgument(f"invalid event name {value or ''}")
    return value


def _checked(kind: str, value: str | None) -> str:
    if value is None or not value.strip():
        raise InvalidArgument(f"empty {kind} not allowed")
    try:
        compile_template(value)
    except TemplateSyntaxError as exc:
        raise InvalidArgument(f"invalid {kind}: {exc}") from None
    return value


def _required_id(request: IdRequest | UpdateEmailTemplateRequest) -> str:
    template_id = request.id
    if not template_id:
        raise InvalidArgument("email template ID required")
    return template_id


def _taken(event_name: str) -> AlreadyExists:
    return AlreadyExists(f"an email template for {event_name} already exists")


class EmailTemplateAdmin:
    def __init__(self, service: Service, storage: Storage) -> None:
        self._service = service
        self._db = storage.db

    async def add_email_template(
        self, request: AddEmailTemplateRequest, caller: CallerContext
    ) -> Reply:
        await self._service.require_admin(caller)
        event_name = _event_name(request.event_name)
        subject = _checked("subject", request.subject)
        template = _checked("template", request.template)
        design = request.design or ""
        now = int(time.time())

        def add(conn: Any) -> str | None:
            if email_templates.event_taken(conn, event_name):
                return None
            template_id = email_templates.insert_template(
                conn,
                event_name=event_name,
                subject=subject,
                template=template,
                design=design,
                now=now,
            )
            record_admin_action(
                conn,
                caller,
                "admin.email_template_created",
                resource_type="email_template",
                resource_id=template_id,
                metadata={"event_name": event_name},
            )
            return template_id

        if await self._db.run_locked(f"email_template:{event_name}", add) is None:
            raise _taken(event_name)
        return Reply({"message": "Email template added successfully"})

    async def update_email_template(
        self, request: UpdateEmailTemplateRequest, caller: CallerContext
    ) -> Reply:
        await self._service.require_admin(caller)
        template_id = _required_id(request)
        changes: dict[str, Any] = {}
        if (event_name := request.event_name) is not None:
            changes["event_name"] = _event_name(event_name)
        if (subject := request.subject) is not None:
            changes["subject"] = _checked("subject", subject)
        if (template := request.template) is not None:
            changes["template"] = _checked("template", template)
        if (design := request.design) is not None:
            changes["design"] = design
        now = int(time.time())

        def update(conn: Any) -> str:
            if "event_name" in changes and email_templates.event_taken(
                conn, changes["event_name"], other_than=template_id
            ):
                return "taken"
            if not email_templates.update_template(conn, template_id, changes, now=now):
                return "missing"
            record_admin_action(
                conn,
                caller,
                "admin.email_template_updated",
                resource_type="email_template",
                resource_id=template_id,
                metadata={"fields": sorted(changes)},
            )
            return "ok"

        outcome = await self._db.run_locked(
            f"email_template:{changes.get('event_name', template_id)}", update
        )
        if outcome == "taken":
            raise _taken(changes["event_name"])
        if outcome == "missing":
            raise NotFound("email template not found")
        return Reply({"message": "Email template updated successfully."})

    async def delete_email_template(self, request: IdRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        template_id = _required_id(request)

        def delete(conn: Any) -> bool:
            if not email_templates.delete_template(conn, template_id):
                return False
            record_admin_action(
                conn,
                caller,
                "admin.email_template_deleted",
                resource_type="email_template",
                resource_id=template_id,
            )
            return True

        if not await self._db.run(delete, write=True):
            raise NotFound("email template not found")
        return Reply({"message": "Email templated deleted successfully"})

    async def email_templates(self, request: ListRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        page = request.pagination
        rows, total = await self._db.run(
            lambda c: email_templates.list_templates(c, offset=page.offset, limit=page.limit)
        )
        return Reply({"email_templates": rows, "pagination": page.describe(total)})
