"""Print the state diagram of every flow, generated from its transition table.

python -m core.state_machines | dot -Tsvg -O     (one digraph per flow)
"""

from __future__ import annotations

import sys

from core.state_machines import MACHINES, to_dot


def main() -> None:
    for name, machine in sorted(MACHINES.items()):
        sys.stdout.write(to_dot(machine.TABLE, name))


if __name__ == "__main__":
    main()
