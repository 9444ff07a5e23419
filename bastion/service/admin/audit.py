"""The audit side of admin operations: one row per action, and the /audit_logs listing."""

from __future__ import annotations

from bastion.core.errors import InvalidArgument
from bastion.service.access import Service
from bastion.service.admin.requests import AuditLogsRequest
from bastion.service.audit import ADMIN_ACTOR_ID, record_admin_action
from bastion.service.context import CallerContext, Reply
from bastion.storage import Storage
from bastion.storage.audit_query import AuditFilter, list_audit_logs

__all__ = ["ADMIN_ACTOR_ID", "AuditLogAdmin", "record_admin_action"]


def _filter(request: AuditLogsRequest) -> AuditFilter:
    resource_type = request.resource_type or None
    resource_id = request.resource_id or None
    # The spec's ``resource``: ``<resource_type>`` or ``<resource_type>:<resource_id>``.
    resource = request.resource
    if resource:
        kind, _, ident = resource.partition(":")
        if (resource_type and resource_type != kind) or (
            ident and resource_id and resource_id != ident
        ):
            raise InvalidArgument("resource contradicts resource_type / resource_id")
        resource_type = kind
        resource_id = ident or resource_id
    start = request.from_timestamp or None
    end = request.to_timestamp or None
    if start is not None and end is not None and start > end:
        raise InvalidArgument("from_timestamp must not be after to_timestamp")
    return AuditFilter(
        action=request.action or None,
        actor_id=request.actor_id or None,
        resource_type=resource_type,
        resource_id=resource_id,
        from_timestamp=start,
        to_timestamp=end,
    )


class AuditLogAdmin:
    def __init__(self, service: Service, storage: Storage) -> None:
        self._service = service
        self._db = storage.db

    async def audit_logs(self, request: AuditLogsRequest, caller: CallerContext) -> Reply:
        """Newest first; ``action``, ``actor_id``, ``resource`` / ``resource_type`` /
        ``resource_id`` and ``from_timestamp`` / ``to_timestamp`` narrow the list."""
        await self._service.require_admin(caller)
        page = request.pagination
        where = _filter(request)
        rows, total = await self._db.run(
            lambda c: list_audit_logs(c, where, offset=page.offset, limit=page.limit)
        )
        return Reply({"audit_logs": rows, "pagination": page.describe(total)})
