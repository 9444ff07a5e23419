"""MFA outcomes as webhook events: a challenge issued, passed or failed, a guess budget
spent (``user.mfa_guesses_exhausted``, once per budget window however many codes it then refuses).

The event names are the audit actions of the same outcomes (``user.mfa_challenge_issued``,
``user.mfa_passed``, ``user.mfa_failed``) and are in the webhook registry's known list
(:data:`service.admin.events.WEBHOOK_EVENTS`). The payload is the usual
``{event_name, user, auth_recipe}``; for these events ``auth_recipe`` names the second
factor (``email_otp``, ``sms_otp``, ``totp``). The event is queued in the flow's own
transaction, so an outcome and its announcement commit together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import sqlalchemy as sa

from bastion.core.auth.mfa import Method
from bastion.core.state_machines.mfa_effects import MfaOutcome
from bastion.storage import users as user_rows
from bastion.storage.outbox import enqueue

__all__ = ["MFA_WEBHOOK_EVENTS", "outcome_webhook"]

MFA_WEBHOOK_EVENTS: Final[dict[MfaOutcome, str]] = {
    MfaOutcome.ISSUED: "user.mfa_challenge_issued",
    MfaOutcome.PASSED: "user.mfa_passed",
    MfaOutcome.FAILED: "user.mfa_failed",
    MfaOutcome.EXHAUSTED: "user.mfa_guesses_exhausted",
}


def outcome_webhook(
    user_id: str, method: Method, outcome: MfaOutcome, now: int
) -> Callable[[sa.Connection], None]:
    """The SQL step that queues the outcome's event (for a caller that found some enabled
    webhook listening)."""
    event_name = MFA_WEBHOOK_EVENTS[outcome]

    def queue(conn: sa.Connection) -> None:
        user = user_rows.get_by_id(conn, user_id)
        if user is None:
            return
        payload = {
            "event_name": event_name,
            "user": user.to_api_dict(),
            "auth_recipe": method.value,
        }
        enqueue(conn, "webhook_event", payload, now=now)

    return queue
