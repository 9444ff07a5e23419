"""The Redis topologies a ``--memory-store-url`` can name, parsed without connecting:
one server (``redis://``), a Sentinel-watched master (``redis+sentinel://``) or a Cluster
(``redis+cluster://``), each also over TLS (``rediss``). Checked at start-up, used by the
storage layer to build its client."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = ["MEMORY_STORE_SCHEMES", "RedisTopology", "parse_redis_url"]

MEMORY_STORE_SCHEMES = (
    "redis",
    "rediss",
    "redis+sentinel",
    "rediss+sentinel",
    "redis+cluster",
    "rediss+cluster",
)


@dataclass(frozen=True, slots=True)
class RedisTopology:
    kind: str  # "single", "sentinel" or "cluster"
    tls: bool
    hosts: tuple[tuple[str, int], ...]
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None


def parse_redis_url(url: str) -> RedisTopology:
    """The topology a URL names; ValueError with the reason for a malformed one."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in MEMORY_STORE_SCHEMES:
        raise ValueError(f"not a Redis URL scheme: {scheme or '(none)'}")
    tls = scheme.startswith("rediss")
    if "+" not in scheme:
        return RedisTopology("single", tls, ())
    kind = scheme.partition("+")[2]
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    hosts = tuple(_host_port(h) for h in hostlist.split(",") if h)
    if not hosts:
        raise ValueError(f"{scheme}:// names no host")
    path = [p for p in parts.path.split("/") if p]
    service, db = "", 0
    if kind == "sentinel":
        if not path or len(path) > 2:
            raise ValueError("redis+sentinel:// needs /<service-name>[/<db>] after the hosts")
        service = unquote(path[0])
        if len(path) == 2:
            if not path[1].isdigit():
                raise ValueError(f"the database number must be an integer, not {path[1]!r}")
            db = int(path[1])
    elif path:
        raise ValueError("redis+cluster:// takes no path: a cluster has database 0 only")
    return RedisTopology(
        kind,
        tls,
        hosts,
        service,
        db,
        unquote(username) or None,
        unquote(password) or None,
    )


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"expected host:port, got {text!r}")
    return host.strip("[]"), int(port)
