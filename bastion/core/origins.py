"""Which browser origins bastion trusts, from ``--allowed-origins`` and ``--url``.

One matcher for CORS, CSRF and redirect targets, over plain strings (no framework), so
the HTTP edge and the service layer decide alike and each rule is tested exhaustively.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["OriginPolicy"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class _Origin:
    host: str
    port: int | None


# Every browser request parses its origin two or three times (CSRF, CORS): the parses of
# the origins seen most recently are kept (a bounded number: the client chooses it).
@functools.lru_cache(maxsize=1024)
def _parse_origin(value: str) -> _Origin | None:
    """``scheme://host[:port]`` -> host and explicit non-default port; None if unparsable."""
    try:
        parts = urlsplit(value if "://" in value else f"http://{value}")
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    if port is not None and port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        port = None
    return _Origin(host, port)


def _label_matches(pattern: str, label: str) -> bool:
    """A pattern label may hold ``*`` standing for any run of characters."""
    if "*" not in pattern:
        return pattern == label
    return re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), label) is not None


def _host_matches(pattern: str, host: str) -> bool:
    p_labels = pattern.split(".")
    h_labels = host.split(".")
    if p_labels[0] == "*":
        # "*.example.com": one or more sub-domain labels in front of example.com.
        rest = p_labels[1:]
        return len(h_labels) > len(rest) and all(
            _label_matches(p, h) for p, h in zip(rest, h_labels[-len(rest) :], strict=True)
        )
    return len(p_labels) == len(h_labels) and all(
        _label_matches(p, h) for p, h in zip(p_labels, h_labels, strict=True)
    )


class OriginPolicy:
    """Which browser origins may call us, from ``--allowed-origins`` and ``--url``.

    Two levels. An origin is *trusted* (with the user's cookies: credentialed CORS,
    cookie-carrying state changes, redirects) when it is the server's own (``--url``) or
    matches a listed entry: origins or host patterns, where the scheme is not compared,
    a port is compared unless it is the scheme's default, and ``*`` stands for one or
    more sub-domain labels (``*.example.com``) or for characters inside a label
    (``app-*.example.com``). ``*`` in the list trusts nobody more: it lets any origin
    call *without* cookies (CORS answers ``*``). ``null`` (sandboxed frames, files,
    some redirects) is never allowed at all.
    """

    def __init__(self, allowed_origins: Iterable[str], own_url: str) -> None:
        entries = [e.strip() for e in allowed_origins if e.strip()]
        self.allow_any = "*" in entries
        self._patterns = [o for o in (_parse_origin(e) for e in entries if e != "*") if o]
        self._own = _parse_origin(own_url)

    def trusts(self, origin: str) -> bool:
        """May ``origin`` act with the user's cookies?"""
        if origin.strip().lower() == "null":
            return False
        parsed = _parse_origin(origin)
        if parsed is None:
            return False
        if parsed == self._own:
            return True
        return any(
            p.port == parsed.port and _host_matches(p.host, parsed.host) for p in self._patterns
        )

    def allows(self, origin: str) -> bool:
        """May ``origin`` call at all (without cookies)?"""
        if origin.strip().lower() == "null":
            return False
        return self.allow_any or self.trusts(origin)
