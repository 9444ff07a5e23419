"""Composing the mails the flows send: the ONE place a mail's subject and body are decided.

``compose_mail`` renders ``core.auth.emails``' default for the event; stored template
overrides (admin email templates) plug in here. ``variables`` holds ``user`` (a
:class:`core.auth.user.User`) and either ``verification_url`` or ``otp``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from bastion.core.auth.emails import EmailEvent, render_default_email
from bastion.core.auth.user import User
from bastion.core.settings import Settings
from bastion.core.templating import compile_template, render
from bastion.service.mail import Mail
from bastion.storage import Storage, email_templates
from bastion.storage.sql.database import Database

__all__ = ["compose_mail"]


class _HasSettings(Protocol):
    @property
    def settings(self) -> Settings: ...

    @property
    def storage(self) -> Storage: ...


def _text_body(event: EmailEvent, variables: Mapping[str, Any]) -> str:
    if variables.get("otp"):
        return f"Your one-time code: {variables['otp']}\n"
    return f"Open this link to continue:\n{variables.get('verification_url', '')}\n"


@dataclass(frozen=True, slots=True)
class RenderedTemplate:
    subject: str
    html: str


async def render_admin_template(
    db: Database, event_name: str, variables: Mapping[str, Any]
) -> RenderedTemplate | None:
    """The admin's template for ``event_name`` filled in, or None to use the built-in mail.

    ``variables`` are Authorizer's: ``user``, ``organization`` (``name``, ``logo``) and
    ``verification_url`` or ``otp``. The body is rendered with HTML escaping, the subject
    as text.
    """
    saved = await db.run(lambda c: email_templates.template_for_event(c, event_name))
    if saved is None:
        return None
    subject = render(compile_template(saved["subject"]), variables, escape=False)
    body = render(compile_template(saved["template"]), variables, escape=True)
    return RenderedTemplate(subject=" ".join(subject.split()), html=body)


async def compose_mail(
    runtime: _HasSettings,
    event_name: str,
    to: str,
    variables: Mapping[str, Any],
    *,
    organization: tuple[str, str] | None = None,
) -> Mail:
    """``organization``: the name and logo to show (a queued flow's requester's); else
    this process's flags."""
    settings = runtime.settings
    name, logo = organization or (settings.organization_name, settings.organization_logo)
    event = EmailEvent(event_name)
    user = variables["user"]
    if not isinstance(user, User):
        raise TypeError("variables['user'] must be a core.auth.user.User")
    # An admin template for the event replaces the built-in mail (Authorizer's variables).
    custom = await render_admin_template(
        runtime.storage.db,
        event_name,
        {
            "user": user.to_api_dict(),
            "organization": {"name": name, "logo": logo},
            "verification_url": variables.get("verification_url") or "",
            "otp": variables.get("otp") or "",
        },
    )
    if custom is not None:
        return Mail(
            to=to, subject=custom.subject, html=custom.html, text=_text_body(event, variables)
        )
    rendered = render_default_email(
        event,
        user=user,
        organization_name=name,
        organization_logo=logo,
        verification_url=variables.get("verification_url"),
        otp=variables.get("otp"),
    )
    return Mail(
        to=to, subject=rendered.subject, html=rendered.html, text=_text_body(event, variables)
    )
