"""Handoffs: how one flow asks its driver to start the next one.

A flow that cannot finish on its own (a login that needs a second factor, a phone signup
that must prove the number, a password reset by SMS code) ends its last batch with a
:class:`Handoff`. The effect names the next machine (``flow``, a key of
``core.state_machines.MACHINES``) and carries the event that starts it, so a driver chains
machines without knowing which flow parks where::

    for effect in machine.handle(event):
        if isinstance(effect, Handoff):
            machine, event = MACHINES[effect.flow](env), effect.event
            ...

A handoff never waits for a reply and is always the last effect of its batch.
Flows that continue when the user follows an emailed link say so on the link instead
(:attr:`~core.state_machines.effects.CreateVerificationRequest.continues_in`).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from bastion.core.auth.mfa import Method, Purpose
from bastion.core.auth.user import SignupMethod, User
from bastion.core.state_machines._machine import Event, Handoff

__all__ = ["ChallengeRequested", "Handoff", "StartChallenge"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChallengeRequested(Event):
    """Challenge ``user`` by ``method`` (chosen by ``MfaPolicy``) for ``purpose``;
    ``channel`` is how the user identified (email or phone)."""

    user: User
    method: Method
    purpose: Purpose = Purpose.LOGIN
    channel: SignupMethod = SignupMethod.BASIC_AUTH
    roles: tuple[str, ...] = ()
    scope: tuple[str, ...] = ()
    #: OAuth authorize ``state`` to bind the login to, if any
    state: str | None = None
    #: issued by an ``*_mfa_setup`` operation: passing it enrols ``method``
    setup: bool = False
    #: the codes the answer offers to set up instead (``should_offer_*_mfa_setup``)
    offers: tuple[Method, ...] = ()
    #: the user's passkey can finish it (``should_offer_webauthn_mfa_verify``)
    passkey: bool = False

    def __post_init__(self) -> None:
        if self.method is Method.EMAIL_OTP and not self.user.email:
            raise ValueError("an email code needs a user with an email")
        if self.method is Method.SMS_OTP and not self.user.phone_number:
            raise ValueError("an SMS code needs a user with a phone number")
        if self.purpose is not Purpose.LOGIN and self.method is not Method.SMS_OTP:
            raise ValueError(f"{self.purpose} goes by SMS code")
        if self.method is Method.WEBAUTHN and (self.setup or not self.passkey):
            raise ValueError("a passkey challenge is for a login by a user with a passkey")
        by_phone = self.channel in (SignupMethod.MOBILE_BASIC_AUTH, SignupMethod.MOBILE_OTP)
        if not (self.user.phone_number if by_phone else self.user.email):
            raise ValueError("the user lacks the identifier of the channel")

    @classmethod
    def for_password_reset(cls, user: User) -> ChallengeRequested:
        """The SMS code ``forgot_password`` by phone sends; only ``reset_password`` takes it."""
        return cls(
            user=user,
            method=Method.SMS_OTP,
            purpose=Purpose.PASSWORD_RESET,
            channel=SignupMethod.MOBILE_BASIC_AUTH,
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class StartChallenge(Handoff):
    """Start the MFA flow: send (or ask for) a code by ``request.method``."""

    flow: ClassVar[str] = "mfa"
    request: ChallengeRequested

    @property
    def event(self) -> ChallengeRequested:
        return self.request

    @property
    def method(self) -> Method:
        return self.request.method

    @property
    def purpose(self) -> Purpose:
        return self.request.purpose
