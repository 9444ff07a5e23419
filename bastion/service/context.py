"""What every service operation is told about its caller, whatever the surface."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Protocol(enum.Enum):
    #: JSON over HTTP under /v1
    REST = "rest"
    #: POST /graphql
    GRAPHQL = "graphql"
    #: authorizer.v1 services over gRPC
    GRPC = "grpc"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallerContext:
    """Who is calling and from where, as the transport established it.

    ``client_ip`` is already resolved per ``--trusted-proxies``. Credentials are carried
    raw (bearer token, cookies, admin secret); the service layer decides what they prove.
    """

    protocol: Protocol
    client_ip: str
    user_agent: str = ""
    bearer_token: str | None = None
    cookies: dict[str, str] = field(default_factory=dict)
    admin_secret_header: str | None = None
    #: ``x-authorizer-client-id``: the application an Authorizer client was set up for.
    client_id_header: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Cookie:
    """A cookie the transport must set (``max_age`` > 0) or clear (``max_age`` == 0)."""

    name: str
    value: str
    max_age: int
    http_only: bool = True
    secure: bool = True
    same_site: str = "Lax"
    domain: str | None = None
    path: str = "/"


@dataclass(frozen=True, slots=True)
class Reply:
    """A service operation's result: the response body and what the transport must do."""

    body: dict[str, Any]
    cookies: tuple[Cookie, ...] = ()
