"""Condition parameters the server fills (``--fga-server-context``), whatever the caller sends.

A request ``context`` is what the caller asserts: the time, its own address. A condition
that decides on those must not take them from the caller, so the operator names the
parameters the server fills instead: ``NAME=SOURCE`` (or ``SOURCE`` alone, for a parameter
of that name), where SOURCE is ``current_time`` (the server's clock, RFC 3339 in UTC) or
``client_ip`` (the caller's address as ``--trusted-proxies`` established it). The filled
values replace the caller's; a tuple's stored context still overrides both, as OpenFGA
merges contexts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SOURCES", "fill_server_context", "parse_server_context"]

#: Where a server-filled parameter's value comes from.
SOURCES = ("current_time", "client_ip")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_server_context(entries: Iterable[str]) -> dict[str, str]:
    """``["current_time", "ip=client_ip"]`` -> ``{"current_time": "current_time", "ip":
    "client_ip"}``; a :class:`ValueError` naming the entry that is wrong."""
    filled: dict[str, str] = {}
    for entry in entries:
        name, _, source = entry.strip().partition("=")
        name, source = name.strip(), (source or name).strip()
        if source not in SOURCES:
            raise ValueError(f"{entry!r}: the source must be one of {', '.join(SOURCES)}")
        if not _NAME.fullmatch(name):
            raise ValueError(f"{entry!r}: {name!r} is not a condition parameter name")
        if name in filled:
            raise ValueError(f"{entry!r}: {name!r} is named twice")
        filled[name] = source
    return filled


def fill_server_context(
    context: Mapping[str, Any], filled: Mapping[str, str], *, now: float, client_ip: str
) -> dict[str, Any]:
    """``context`` with the server's values for the ``filled`` parameters (``now``: Unix
    seconds)."""
    if not filled:
        return dict(context)
    moment = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    values = {"current_time": moment, "client_ip": client_ip}
    return {**context, **{name: values[source] for name, source in filled.items()}}
