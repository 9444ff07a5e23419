"""The ``update_email`` verification a changed address gets, for update_profile and the
admin's update_user alike: a verification request, its signed token and the mail with
the link. Nothing is written here; the caller stores all three in the transaction that
changes the address (:func:`store_email_change`), so the change and its mail commit
together or not at all.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import sqlalchemy as sa

from bastion.core.auth.claims import verification_token_claims
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.links import default_redirect, verify_email_link
from bastion.core.auth.user import User
from bastion.core.auth.verification import VerificationRequest
from bastion.service.auth.mail import compose_mail
from bastion.service.mail import Mail
from bastion.storage import verification as verification_rows
from bastion.storage.outbox import enqueue

if TYPE_CHECKING:
    from bastion.core.auth.policy import AuthPolicy
    from bastion.core.ports import IdSource
    from bastion.core.settings import Settings
    from bastion.service.tokens import TokenSigner
    from bastion.storage import Storage

__all__ = ["EmailChange", "prepare_email_change", "store_email_change"]


@dataclass(frozen=True, slots=True)
class EmailChange:
    request: VerificationRequest
    token: str
    mail: Mail


class _Runtime(Protocol):
    """What :func:`prepare_email_change` needs (the auth service provides it)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def storage(self) -> Storage: ...
    @property
    def policy(self) -> AuthPolicy: ...
    @property
    def ids(self) -> IdSource: ...
    @property
    def signer(self) -> TokenSigner: ...


async def prepare_email_change(runtime: _Runtime, user: User, now: int) -> EmailChange:
    """The verification of ``user.email`` (the new address), ready to store."""
    email = user.email
    if not email:
        raise ValueError("an email change needs the new address")
    policy = runtime.policy
    nonce = runtime.ids.new_id()
    redirect = default_redirect(policy)
    request = VerificationRequest(
        id=runtime.ids.new_id(),
        identifier=EmailEvent.UPDATE_EMAIL.value,
        email=email,
        nonce=nonce,
        redirect_uri=redirect,
        expires_at=now + policy.verification_ttl,
    )
    token = runtime.signer.sign(
        verification_token_claims(
            policy=policy,
            email=email,
            identifier=request.identifier,
            nonce=nonce,
            redirect_uri=redirect,
            now=now,
        )
    )
    mail = await compose_mail(
        runtime,
        EmailEvent.UPDATE_EMAIL.value,
        email,
        {"user": user, "verification_url": verify_email_link(policy, token, redirect)},
    )
    return EmailChange(request=request, token=token, mail=mail)


def store_email_change(conn: sa.Connection, change: EmailChange, now: int) -> None:
    verification_rows.replace(conn, change.request, token=change.token, now=now)
    enqueue(conn, "mail", dataclasses.asdict(change.mail), now=now)
