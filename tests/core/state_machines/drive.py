"""Feed a machine a scripted conversation and collect what it asked for."""

from __future__ import annotations

from typing import Any

from bastion.core.state_machines._machine import Effect, Event, Machine


def drive(machine: Machine[Any], *events: Event) -> list[list[Effect]]:
    """Handle ``events`` in order; the effects of each step, one list per event."""
    return [machine.handle(event) for event in events]


def last(machine: Machine[Any], *events: Event) -> list[Effect]:
    """The effects of the final step of a conversation."""
    return drive(machine, *events)[-1]
