"""The Redis topologies a ``--memory-store-url`` can name, parsed without connecting:
one server (``redis://``), a Sentinel-watched master (``redis+sentinel://``) or a Cluster
(``redis+cluster://``), each also over TLS (``rediss``). Checked at start-up, used by the
storage layer to build its client."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["MEMORY_STORE_SCHEMES", "RedisTopology", "TlsSettings", "parse_redis_url"]

MEMORY_STORE_SCHEMES = (
    "redis",
    "rediss",
    "redis+sentinel",
    "rediss+sentinel",
    "redis+cluster",
    "rediss+cluster",
)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """The query's TLS options, named and read as redis-py reads them, once for both
    clients (the trio one's ``SSLContext``, redis-py's own arguments on a Cluster)."""

    #: "required" (the default), "optional" or "none"
    cert_reqs: str = "required"
    check_hostname: bool = True
    ca_certs: str | None = None
    certfile: str | None = None
    keyfile: str | None = None


@dataclass(frozen=True, slots=True)
class RedisTopology:
    kind: str  # "single", "sentinel" or "cluster"
    tls: bool
    hosts: tuple[tuple[str, int], ...]
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    #: the query's ``name=value`` pairs (TLS settings: ``ssl_cert_reqs``, ``ssl_ca_certs``...)
    options: tuple[tuple[str, str], ...] = ()

    def tls_settings(self) -> TlsSettings:
        """How a ``rediss`` client checks the servers (and shows its own certificate)."""
        return _tls_settings(self.options)


def parse_redis_url(url: str) -> RedisTopology:
    """The topology a URL names; ValueError with the reason for a malformed one."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in MEMORY_STORE_SCHEMES:
        raise ValueError(f"not a Redis URL scheme: {scheme or '(none)'}")
    tls = scheme.startswith("rediss")
    kind = scheme.partition("+")[2] or "single"
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    options = tuple(parse_qsl(parts.query))
    if tls:
        _tls_settings(options)  # a bad TLS option is refused at start-up
    path = [p for p in parts.path.split("/") if p]
    if kind == "single":
        # redis-py's defaults: localhost, port 6379, database 0.
        if len(path) > 1 or (path and not path[0].isdigit()):
            raise ValueError(f"the database number must be an integer, not {parts.path!r}")
        host = _host_port(
            hostlist if hostlist.rpartition("]")[2].count(":") else f"{hostlist}:6379",
            empty_host=True,
        )
        return RedisTopology(
            kind,
            tls,
            ((host[0] or "localhost", host[1]),),
            db=int(path[0]) if path else 0,
            username=unquote(username) or None,
            password=unquote(password) or None,
            options=options,
        )
    hosts = tuple(_host_port(h) for h in hostlist.split(",") if h)
    if not hosts:
        raise ValueError(f"{scheme}:// names no host")
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
        options,
    )


def _tls_settings(options: tuple[tuple[str, str], ...]) -> TlsSettings:
    """``ssl_cert_reqs`` (``required``/``optional``/``none``, or ssl's ``CERT_*`` names),
    ``ssl_check_hostname``, ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``."""
    named = dict(options)
    reqs = named.get("ssl_cert_reqs", "required").lower().removeprefix("cert_")
    if reqs not in ("required", "optional", "none"):
        raise ValueError(f"ssl_cert_reqs must be required, optional or none, not {reqs!r}")
    check = named.get("ssl_check_hostname", "true").lower() not in ("false", "0", "no")
    return TlsSettings(
        cert_reqs=reqs,
        check_hostname=check and reqs != "none",
        ca_certs=named.get("ssl_ca_certs"),
        certfile=named.get("ssl_certfile"),
        keyfile=named.get("ssl_keyfile"),
    )


def _host_port(text: str, *, empty_host: bool = False) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not (host or empty_host):
        raise ValueError(f"expected host:port, got {text!r}")
    return host.strip("[]"), int(port)
