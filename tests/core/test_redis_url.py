"""``parse_redis_url`` on one-server URLs: what the memory store's trio client connects to
(host, port, database, user, password and TLS options), with redis-py's defaults."""

from __future__ import annotations

import pytest

from bastion.core.redis_url import RedisTopology, parse_redis_url


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
