"""Webhook targets: checked where the connection is made, not only when registered.

A hostname can resolve to a public address when the webhook is saved and to
``127.0.0.1`` a minute later (DNS rebinding), so :func:`resolve_target` resolves the
host itself, refuses it if ANY address it resolves to is loopback, link-local, private
or otherwise not globally routable, and hands back the checked address: the request is
then made to that address (``Host`` header and TLS server name stay the hostname), so
nothing resolves the name a second time. ``--webhook-allow-private-targets`` (tests,
internal deployments) turns the address check off, never the scheme check.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import trio

__all__ = ["RefusedTarget", "Target", "check_endpoint", "check_saved_endpoint", "resolve_target"]

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class RefusedTarget(Exception):
    """The endpoint is not one bastion may call; retrying cannot change that."""


class UnresolvableTarget(Exception):
    """The host did not resolve (now); a later attempt may succeed."""


@dataclass(frozen=True, slots=True)
class Target:
    #: The URL to request: the checked address in place of the hostname.
    url: str
    #: The ``Host`` header value (the endpoint's host[:port]).
    host_header: str
    #: The hostname for TLS (SNI and certificate checks); None for plain HTTP.
    tls_server_name: str | None


def _parts(endpoint: str) -> SplitResult:
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in {"http", "https"}:
        raise RefusedTarget("the endpoint must be an http or https URL")
    if not parts.hostname:
        raise RefusedTarget("the endpoint has no host")
    if parts.username or parts.password:
        raise RefusedTarget("the endpoint must not carry credentials")
    try:
        _ = parts.port
    except ValueError:
        raise RefusedTarget("the endpoint has an invalid port") from None
    return parts


def address_refusal(address: IpAddress) -> str | None:
    """Why ``address`` may not be called, or None for a public address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_private:
        return "private"
    if address.is_multicast or address.is_unspecified or address.is_reserved:
        return "not routable"
    if not address.is_global:
        return "not public"
    return None


def check_endpoint(endpoint: str, *, allow_private: bool) -> None:
    """What can be checked when a webhook is saved: scheme, host, a literal address."""
    parts = _parts(endpoint)
    try:
        literal = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return
    reason = address_refusal(literal)
    if reason is not None and not allow_private:
        raise RefusedTarget(f"{parts.hostname} is a {reason} address")


async def check_saved_endpoint(endpoint: str, *, allow_private: bool) -> None:
    """The save-time check: :func:`check_endpoint`, then the host's addresses as they
    resolve now (decimal, octal and hex IPv4 forms resolve too). A host that does not
    resolve yet is accepted: delivery refuses it if it later resolves somewhere private."""
    check_endpoint(endpoint, allow_private=allow_private)
    if allow_private:
        return
    try:
        await resolve_target(endpoint, allow_private=False)
    except UnresolvableTarget:
        return


async def resolve_target(endpoint: str, *, allow_private: bool) -> Target:
    parts = _parts(endpoint)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UnresolvableTarget(f"{host} did not resolve: {exc}") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]
    if not addresses:
        raise UnresolvableTarget(f"{host} did not resolve")
    if not allow_private:
        for address in addresses:
            reason = address_refusal(address)
            if reason is not None:
                raise RefusedTarget(f"{host} resolves to a {reason} address ({address})")
    chosen = addresses[0]
    literal = f"[{chosen}]" if chosen.version == 6 else str(chosen)
    netloc = f"{literal}:{port}"
    url = parts._replace(netloc=netloc, fragment="").geturl()
    return Target(
        url=url,
        host_header=parts.netloc.rpartition("@")[2],
        tls_server_name=host if parts.scheme == "https" else None,
    )
