"""Origins and sites, as the browser security model sees them.

A *site* is the registrable part of a host: here its last two labels (``example.com`` of
``app.example.com``), or the whole host for an IP address or a single label such as
``localhost``. This is the same approximation the shared-cookie domain uses; a public
suffix of two labels (``co.uk``) makes two owners look like one site, which only
matters for the SameSite default and is overridden by ``--app-cookie-same-site``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

__all__ = ["cross_site_origins", "insecure_origins", "site_of"]

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def site_of(host: str) -> str:
    host = host.lower().strip("[]").rstrip(".")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        labels = host.split(".")
        return ".".join(labels[-2:])
    return host


def _host(origin: str) -> str:
    try:
        return (urlsplit(origin if "://" in origin else f"https://{origin}").hostname or "").lower()
    except ValueError:
        return ""


def cross_site_origins(allowed: Iterable[str], own_url: str) -> list[str]:
    """The listed origins (``*`` aside) on another site than ``own_url``'s."""
    own = site_of(_host(own_url))
    found = []
    for entry in allowed:
        entry = entry.strip()
        if not entry or entry == "*":
            continue
        host = _host(entry.replace("*", "wildcard"))
        if host and site_of(host) != own:
            found.append(entry)
    return found


def insecure_origins(allowed: Iterable[str]) -> list[str]:
    """Listed ``http://`` origins that are not this machine: their traffic, cookies and
    tokens included, can be read and changed on the way."""
    return [
        entry.strip()
        for entry in allowed
        if entry.strip().lower().startswith("http://")
        and _host(entry.strip()) not in _LOOPBACK_NAMES
        and not _host(entry.strip()).endswith(".localhost")
    ]
