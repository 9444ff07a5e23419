"""``parse_redis_url``: what the memory store connects to (host, port, database, user,
password), with redis-py's defaults, and how a ``rediss`` form checks the servers
(``tls_settings``, read from the query as redis-py reads it, for every topology)."""

from __future__ import annotations

import pytest

from bastion.core.redis_url import RedisTopology, TlsSettings, parse_redis_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", RedisTopology("single", False, (("127.0.0.1", 6379),))),
        ("redis://cache", RedisTopology("single", False, (("cache", 6379),))),
        ("redis://", RedisTopology("single", False, (("localhost", 6379),))),
        ("redis://[::1]:6380/2", RedisTopology("single", False, (("::1", 6380),), db=2)),
        (
            "rediss://al%40ce:p%3Ass@cache:6380/3?ssl_ca_certs=/ca.pem",
            RedisTopology(
                "single",
                True,
                (("cache", 6380),),
                db=3,
                username="al@ce",
                password="p:ss",
                options=(("ssl_ca_certs", "/ca.pem"),),
            ),
        ),
        (
            "redis://:secret@cache/1",
            RedisTopology("single", False, (("cache", 6379),), db=1, password="secret"),
        ),
    ],
)
def test_one_server_urls(url: str, expected: RedisTopology) -> None:
    assert parse_redis_url(url) == expected


@pytest.mark.parametrize("url", ["redis://cache/zero", "redis://cache/1/2", "redis://cache:port"])
def test_malformed_one_server_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"integer|host:port"):
        parse_redis_url(url)


def test_tls_sentinel_and_cluster_urls_carry_their_tls_settings() -> None:
    sentinel = parse_redis_url(
        "rediss+sentinel://s1:26379,[::1]:26380/main/2?ssl_ca_certs=/ca.pem"
        "&ssl_certfile=/me.pem&ssl_keyfile=/me.key"
    )
    assert (sentinel.kind, sentinel.tls, sentinel.service, sentinel.db) == (
        "sentinel",
        True,
        "main",
        2,
    )
    assert sentinel.hosts == (("s1", 26379), ("::1", 26380))
    assert sentinel.tls_settings() == TlsSettings(
        ca_certs="/ca.pem", certfile="/me.pem", keyfile="/me.key"
    )
    cluster = parse_redis_url("rediss+cluster://n1:7000,n2:7000?ssl_check_hostname=false")
    assert (cluster.kind, cluster.tls, cluster.hosts) == (
        "cluster",
        True,
        (("n1", 7000), ("n2", 7000)),
    )
    assert cluster.tls_settings() == TlsSettings(check_hostname=False)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", TlsSettings()),
        ("ssl_cert_reqs=CERT_OPTIONAL", TlsSettings(cert_reqs="optional")),
        # Not checking the certificate is not checking its name either.
        ("ssl_cert_reqs=none", TlsSettings(cert_reqs="none", check_hostname=False)),
        ("ssl_check_hostname=0", TlsSettings(check_hostname=False)),
    ],
)
def test_tls_settings_read_as_redis_py_reads_them(query: str, expected: TlsSettings) -> None:
    assert parse_redis_url(f"rediss+cluster://n1:7000?{query}").tls_settings() == expected


def test_an_unknown_certificate_requirement_is_refused() -> None:
    with pytest.raises(ValueError, match="ssl_cert_reqs"):
        parse_redis_url("rediss+sentinel://s1:26379/main?ssl_cert_reqs=maybe")
