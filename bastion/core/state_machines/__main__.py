"""Print the state diagram of every flow, generated from its transition table.

python -m bastion.core.state_machines | dot -Tsvg -O     (one digraph per flow)
"""

from __future__ import annotations

import sys
from typing import Any

from bastion.core.state_machines import MACHINES, Machine, to_dot
from bastion.core.state_machines.oauth_authorize import OAuthAuthorizeMachine


def main() -> None:
    # the authorize flow takes its own policy, so it is not one of the generic MACHINES
    flows: dict[str, type[Machine[Any]]] = {
        **MACHINES,
        OAuthAuthorizeMachine.FLOW: OAuthAuthorizeMachine,
    }
    for name, machine in sorted(flows.items()):
        sys.stdout.write(to_dot(machine.TABLE, name))


if __name__ == "__main__":
    main()
