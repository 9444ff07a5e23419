"""Whether a redirect target is one of ours, decided as the browser will read it.

Every place that sends a browser on (``/authorize``, the mailed links' landing, the hosted
pages, the logout and social-login hops) asks :func:`redirect_allowed`. Python's
``urlsplit`` is not the browser's parser: ``http://evil:1\\@good/`` is ``good`` to it
and ``evil:1`` to every browser (WHATWG URL turns ``\\`` into ``/``). So the target is
parsed by a WHATWG URL parser (ada, the one Node.js uses), its origin is the one checked
against ``--allowed-origins``, and a target is refused outright when it holds anything a
browser rewrites or that two parsers read differently:

- a backslash, raw or as ``%5c``; a control, format (bidi, zero-width) or space character
  anywhere (browsers drop tab and newline inside a URL: ``ht\\ttp``, ``exa\\nmple``);
- a scheme other than ``http`` or ``https``; userinfo (``@`` in the authority);
- a host or port that the WHATWG parser and the plain one read differently: unicode dots
  (``。``), non-ASCII (IDNA) hosts, percent-escapes or IPv4 shorthands in the host
  (``0x7f.1``), a missing or extra ``//`` (``http:evil``, ``http:///evil``). Write
  hosts in ASCII (punycode) to have them accepted.

The target is used as sent (an OAuth ``redirect_uri`` must match byte for byte at the
token endpoint); once these rules pass, every parser agrees on where it goes.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from bastion.core.extras import import_extra
from bastion.core.origins import OriginPolicy

__all__ = ["browser_origin", "redirect_allowed"]

_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Unicode categories never part of a redirect target: controls, format characters
#: (bidi overrides, zero-width joiners), separators (every kind of space).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def _suspicious(uri: str) -> bool:
    if "\\" in uri or "%5c" in uri.lower():
        return True
    return any(c.isspace() or unicodedata.category(c) in _REFUSED_CATEGORIES for c in uri)


def _plain_origin(uri: str) -> tuple[str, str, int] | None:
    """The origin as ``urlsplit`` reads it (the reading of every non-browser part)."""
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES or not host or "@" in parts.netloc:
        return None
    if ":" in host:
        host = f"[{host}]"
    return scheme, host.lower(), port if port is not None else _DEFAULT_PORTS[scheme]


@cache
def _ada() -> Any:
    """ada-url, imported on first use (``pip install bastion-core[redirects]``), so that
    ``core`` imports without it."""
    return import_extra("ada_url", extra="redirects", feature="redirect validation")


def _whatwg_origin(uri: str) -> tuple[str, str, int] | None:
    """The origin as a browser reads it (WHATWG URL)."""
    try:
        url = _ada().URL(uri)
    except ValueError:
        return None
    scheme = url.protocol.removesuffix(":")
    if scheme not in _SCHEMES or url.username or url.password or not url.hostname:
        return None
    port = int(url.port) if url.port else _DEFAULT_PORTS[scheme]
    return scheme, url.hostname, port


def browser_origin(uri: str) -> str | None:
    """``scheme://host:port`` the browser will go to, or None when ``uri`` is not an
    unambiguous http(s) URL (see the module's rules)."""
    if _suspicious(uri):
        return None
    whatwg = _whatwg_origin(uri)
    if whatwg is None or whatwg != _plain_origin(uri):
        return None
    scheme, host, port = whatwg
    return f"{scheme}://{host}:{port}"


def redirect_allowed(uri: str, origins: OriginPolicy) -> bool:
    """May a browser be sent to ``uri``: an unambiguous http(s) URL whose browser origin
    ``origins`` trusts (``--url`` or ``--allowed-origins``)."""
    origin = browser_origin(uri)
    return origin is not None and origins.trusts(origin)
