"""Which endpoint answers a request: a path table for the HTTP application.

Most paths are fixed (``/v1/login``), so they are found with one dictionary lookup; the
few with parameters (``/oauth_login/{provider}``, OpenFGA's ``/stores/{store_id}/...``)
use Starlette's path syntax and its compiled patterns. A GET endpoint answers HEAD too.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.convertors import Convertor
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import compile_path

from bastion.transports.http.routes import Route

__all__ = ["Dispatcher", "Endpoint", "Handler", "Match", "View"]

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class View:
    """An HTTP endpoint that is not a JSON operation (a redirect, a form, a page, another
    API's wire format). ``path`` in Starlette's syntax; parameters arrive in
    ``request.path_params``."""

    path: str
    methods: tuple[str, ...]
    handler: Handler
    #: The handler answers from memory, never waiting (no storage, no body, no I/O): it
    #: needs no ``--request-timeout`` deadline. One that waits all the same fails (500).
    instant: bool = False


@dataclass(frozen=True, slots=True)
class Endpoint:
    handler: Handler
    #: The path as declared (parameters unfilled): the metrics' ``path`` label.
    rule: str
    #: The JSON route it serves, if any: its rate-limit exemption, body limit and guard.
    route: Route | None = None
    #: See :attr:`View.instant`.
    instant: bool = False


@dataclass(slots=True)
class Match:
    #: The endpoint for the request's method; None when the path has none for it (405).
    endpoint: Endpoint | None
    allowed: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Pattern:
    regex: re.Pattern[str]
    convertors: dict[str, Convertor[Any]]
    by_method: dict[str, Endpoint]


class Dispatcher:
    def __init__(self) -> None:
        self._fixed: dict[str, dict[str, Endpoint]] = {}
        self._patterns: dict[str, _Pattern] = {}

    def add(self, path: str, methods: tuple[str, ...], endpoint: Endpoint) -> None:
        regex, _, convertors = compile_path(path)
        if convertors:
            pattern = self._patterns.setdefault(path, _Pattern(regex, convertors, {}))
            table = pattern.by_method
        else:
            table = self._fixed.setdefault(path, {})
        for method in methods:
            if method in table:
                raise ValueError(f"{method} {path} is served twice")
            table[method] = endpoint

    def match(self, method: str, path: str) -> Match | None:
        """The endpoint for ``method`` on ``path``; None when no endpoint has the path."""
        params: dict[str, Any] = {}
        table = self._fixed.get(path)
        if table is None:
            for pattern in self._patterns.values():
                found = pattern.regex.match(path)
                if found is not None:
                    table = pattern.by_method
                    params = {
                        name: pattern.convertors[name].convert(value)
                        for name, value in found.groupdict().items()
                    }
                    break
            else:
                return None
        endpoint = table.get(method)
        if endpoint is None and method == "HEAD":
            endpoint = table.get("GET")
        return Match(endpoint, tuple(sorted(table)), params)

    def served(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """Every path with the methods it answers."""
        for path, table in self._fixed.items():
            yield path, tuple(table)
        for path, pattern in self._patterns.items():
            yield path, tuple(pattern.by_method)
