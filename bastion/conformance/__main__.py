"""``python -m bastion.conformance SUITE ARGS...``: a small dispatcher over conformance suites."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence


def _openfga(argv: Sequence[str]) -> int:
    try:
        from bastion.conformance.openfga.runner import main
    except ImportError as exc:  # the embedded engine is bastion-core's
        print(
            f"cannot start: {exc}: the openfga suite needs bastion-core "
            "(pip install ./packages/bastion-core from bastion's tree)",
            file=sys.stderr,
        )
        return 2
    return main(argv)


def _coverage(argv: Sequence[str]) -> int:
    from bastion.conformance.coverage import main

    return main(argv)


SUITES: dict[str, Callable[[Sequence[str]], int]] = {"openfga": _openfga, "coverage": _coverage}


def _cross_surface(argv: Sequence[str]) -> int:
    from bastion.conformance.cli import main

    return main(argv)


def main(argv: Sequence[str]) -> int:
    if argv and argv[0].startswith("-"):  # the default suite: REST x GraphQL x gRPC
        return _cross_surface(argv)
    if not argv or argv[0] not in SUITES:
        print(
            f"usage: bastion-conformance [{{{','.join(sorted(SUITES))}}}] ARGS... "
            "(bastion-conformance --help: the cross-surface suite's options)",
            file=sys.stderr,
        )
        return 2
    return SUITES[argv[0]](argv[1:])


def console() -> None:
    """The ``bastion-conformance`` console script."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    console()
