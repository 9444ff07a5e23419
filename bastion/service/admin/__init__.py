"""The super-admin surface beyond the admin session: users and access, invitations,
webhooks and their delivery, email templates, the audit log, a user's sessions.

:class:`Admin` groups the feature services the Runtime holds; ``transports.rest.admin``,
``transports.graphql.operations`` and ``transports.grpc.services`` map them to the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

from bastion.core.settings import Settings
from bastion.service.access import Service
from bastion.service.admin.audit import AuditLogAdmin
from bastion.service.admin.delivery import WebhookSender, webhook_handlers
from bastion.service.admin.email_templates import EmailTemplateAdmin
from bastion.service.admin.user_sessions import UserSessionAdmin
from bastion.service.admin.users import UserAdmin
from bastion.service.admin.webhooks import WebhookAdmin
from bastion.service.auth.service import AuthService
from bastion.service.outbox import Handler
from bastion.storage import Storage

__all__ = ["Admin", "outbox_handlers", "webhook_sender"]


def webhook_sender(settings: Settings) -> WebhookSender:
    """Signs with --webhook-secret, or the client secret as Authorizer does."""
    return WebhookSender(
        settings.webhook_signing_secret,
        allow_private_targets=settings.webhook_allow_private_targets,
    )


@dataclass(frozen=True, slots=True)
class Admin:
    webhooks: WebhookAdmin
    email_templates: EmailTemplateAdmin
    audit: AuditLogAdmin
    users: UserAdmin
    sessions: UserSessionAdmin

    @classmethod
    def build(
        cls, service: Service, settings: Settings, storage: Storage, auth: AuthService
    ) -> Admin:
        return cls(
            webhooks=WebhookAdmin(service, storage, webhook_sender(settings)),
            email_templates=EmailTemplateAdmin(service, storage),
            audit=AuditLogAdmin(service, storage),
            users=UserAdmin(service, auth, storage),
            sessions=UserSessionAdmin(service, auth, storage),
        )


def outbox_handlers(settings: Settings, storage: Storage) -> dict[str, Handler]:
    """The webhook kinds of the outbox: ``webhook_event`` (fan-out) and ``webhook_delivery``."""
    return webhook_handlers(storage.db, webhook_sender(settings))
