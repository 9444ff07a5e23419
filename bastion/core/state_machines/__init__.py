"""One explicit state machine per authentication flow (see ``_machine`` for the rules).

Each flow module exports its ``State`` enum, its request events and its machine class;
shared result events live in :mod:`.events` and effects in :mod:`.effects`.
"""

from typing import Any

from bastion.core.state_machines._machine import Effect, Event, LocalFlowError, Machine, to_dot
from bastion.core.state_machines.login import LoginMachine
from bastion.core.state_machines.magic_link import MagicLinkMachine
from bastion.core.state_machines.password_reset import PasswordResetMachine
from bastion.core.state_machines.session import SessionMachine
from bastion.core.state_machines.signup import SignupMachine
from bastion.core.state_machines.social_login import SocialLoginMachine
from bastion.core.state_machines.verification import VerificationMachine

__all__ = [
    "MACHINES",
    "Effect",
    "Event",
    "LocalFlowError",
    "LoginMachine",
    "Machine",
    "MagicLinkMachine",
    "PasswordResetMachine",
    "SessionMachine",
    "SignupMachine",
    "SocialLoginMachine",
    "VerificationMachine",
    "to_dot",
]

#: every flow machine, by its ``FLOW`` name (what ``to_dict()["flow"]`` says)
MACHINES: dict[str, type[Machine[Any]]] = {
    m.FLOW: m
    for m in (
        SignupMachine,
        LoginMachine,
        VerificationMachine,
        MagicLinkMachine,
        PasswordResetMachine,
        SessionMachine,
        SocialLoginMachine,
    )
}
