"""``python -m bastion``: the ``bastion`` command (how ``--workers`` starts its workers)."""

import sys

from bastion.cli import main

sys.exit(main())
