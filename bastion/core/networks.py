"""The client's address behind proxies (``--trusted-proxies``), for every surface."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

__all__ = ["Network", "authority", "client_ip", "parse_networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def authority(host: str, port: int) -> str:
    """``host:port`` as a URL or a listener's address writes it (an IPv6 literal in
    brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_networks(entries: Sequence[str]) -> tuple[Network, ...]:
    """CIDRs (or single addresses) from ``--trusted-proxies``; validated at startup."""
    return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip())


def _trusted(address: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == n.version and ip in n for n in networks)


def client_ip(peer: str, forwarded_for: Sequence[str], trusted: Sequence[Network]) -> str:
    """The client's address as ``--trusted-proxies`` defines it.

    ``forwarded_for`` is every ``X-Forwarded-For`` header line of the request, in order:
    a proxy may append its hop as a line of its own (haproxy's ``option forwardfor``
    does) after the line the client wrote, so the lines are joined into one list first.
    With no trusted network, or a peer outside them, the socket peer is the client and
    the header is ignored (it is whatever the client wrote). From a trusted peer, the
    list is read right to left, skipping trusted hops: the first untrusted address is the
    client, because only the hops we trust appended honestly; a hop that is not an
    address there leaves the peer as the client.
    """
    if not trusted or not forwarded_for or not _trusted(peer, trusted):
        return peer
    hops = [h.strip() for line in forwarded_for for h in line.split(",") if h.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return peer
        if not _trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer
