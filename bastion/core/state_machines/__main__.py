"""Print the state diagram of every flow, generated from its transition table.

python -m bastion.core.state_machines | dot -Tsvg -O     (one digraph per flow)
"""

from __future__ import annotations

import sys
from typing import Any

from bastion.core.state_machines import MACHINES, Machine, to_dot
from bastion.core.state_machines.oauth_authorize import OAuthAuthorizeMachine
from bastion.core.state_machines.passkey import PasskeyMachine
from bastion.core.state_machines.passkey_options import PasskeyOptionsMachine


def main() -> None:
    # the authorize flow takes its own policy, and the passkey flows are walked by their
    # own tests, so they are not among the generic MACHINES
    flows: dict[str, type[Machine[Any]]] = {
        **MACHINES,
        OAuthAuthorizeMachine.FLOW: OAuthAuthorizeMachine,
        PasskeyOptionsMachine.FLOW: PasskeyOptionsMachine,
        PasskeyMachine.FLOW: PasskeyMachine,
    }
    for name, machine in sorted(flows.items()):
        sys.stdout.write(to_dot(machine.TABLE, name))


if __name__ == "__main__":
    main()
