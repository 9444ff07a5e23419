"""Redirect targets decided as a browser reads them: a table of parser-confusion shapes,
each refused (or allowed) whatever ``urlsplit`` makes of it."""

from __future__ import annotations

import pytest

from bastion.core.origins import OriginPolicy
from bastion.core.redirects import browser_origin, redirect_allowed

OWN = "http://localhost:23780"
ALLOWED = ["https://app.example.com", "http://127.0.0.1:4000"]
POLICY = OriginPolicy(ALLOWED, OWN)

REFUSED = [
    # the attack: urlsplit reads localhost, browsers 127.0.0.1:23998
    "http://127.0.0.1:23998\\@localhost:23780/cb",
    "http://127.0.0.1:23998%5c@localhost:23780/cb",
    "http://127.0.0.1:23998%5C@localhost:23780/cb",
    "http://localhost:23780\\.evil.example/cb",
    "http:/\\evil.example/@localhost:23780/cb",
    "http://localhost:23780/cb\\..\\evil",
    # userinfo
    "http://evil.example@localhost:23780/cb",
    "http://localhost:23780@evil.example/cb",
    "http://evil.example%2f@localhost:23780/cb",
    "http://@localhost:23780/cb",
    "http://user:pass@localhost:23780/cb",
    # whitespace and controls, inside and around
    "http://local\thost:23780/cb",
    "http://localhost:23780/c\nb",
    "ht\ttp://localhost:23780/cb",
    " http://localhost:23780/cb",
    "http://localhost:23780/cb ",
    "http://localhost:23780/cb\r\nSet-Cookie: a=1",
    "http://localhost:23780/\x00cb",
    "http://localhost:23780/\x7fcb",
    "http://localhost:23780/\u200bcb",  # zero-width space
    "http://localhost:23780/\u202ecb",  # right-to-left override
    "http://localhost:23780/\u3000cb",  # ideographic space
    # schemes
    "javascript:alert(1)//http://localhost:23780/",
    "data:text/html,<script>alert(1)</script>",
    "ftp://localhost:23780/cb",
    "//localhost:23780/cb",
    "/cb",
    "localhost:23780/cb",
    "",
    # a missing or extra // (browsers supply or skip it for http)
    "http:localhost:23780/cb",
    "http:/localhost:23780/cb",
    "http:///evil.example/cb",
    "http:////evil.example/cb",
    # unicode dots, IDNA, percent-escapes and IPv4 shorthands in the host
    "https://app\u3002example.com/cb",
    "https://app\uff0eexample.com/cb",
    "https://\u0430pp.example.com/cb",  # Cyrillic a
    "https://app.ex\u00e4mple.com/cb",
    "https://app.example.com\u2024evil/cb",
    "https://app%2eexample.com/cb",
    "http://local%68ost:23780/cb",
    "http://127.1:4000/cb",
    "http://0x7f.0.0.1:4000/cb",
    "http://2130706433:4000/cb",
    "http://0177.0.0.1:4000/cb",
    # port tricks
    "http://localhost:23781/cb",
    "http://localhost/cb",
    "http://localhost:023780x/cb",
    "http://localhost:99999/cb",
    "http://localhost:+23780/cb",
    "http://127.0.0.1:4000:80/cb",
    "https://app.example.com:80/cb",
    # not on the list
    "https://evil.example/cb",
    "https://app.example.com.evil.example/cb",
    "https://evilapp.example.com/cb",
    "http://[::1]:23780/cb",
]

ALLOWED_TARGETS = [
    "http://localhost:23780/cb",
    "http://LOCALHOST:23780/cb?x=1&y=%5b",
    "http://localhost:23780",
    "http://localhost:23780/path/\u00fc?q=\u00e9",  # non-ASCII path and query: escaped alike
    "https://app.example.com/cb",
    "https://app.example.com:443/cb",
    "https://APP.example.com/cb#frag",
    "http://127.0.0.1:4000/cb",
    "http://127.0.0.1:04000/cb",  # the same port, written with a zero: both parsers agree
]


@pytest.mark.parametrize("uri", REFUSED)
def test_confusing_or_foreign_targets_are_refused(uri: str) -> None:
    assert not redirect_allowed(uri, POLICY)


@pytest.mark.parametrize("uri", ALLOWED_TARGETS)
def test_plain_targets_on_the_list_are_allowed(uri: str) -> None:
    assert redirect_allowed(uri, POLICY)


@pytest.mark.parametrize(
    ("uri", "origin"),
    [
        ("http://LocalHost/x", "http://localhost:80"),
        ("https://a.example:8443/x", "https://a.example:8443"),
        ("http://[::1]:9/x", "http://[::1]:9"),
        ("http://127.0.0.1:23998\\@localhost:23780/cb", None),
        ("https://xn--bcher-kva.example/", "https://xn--bcher-kva.example:443"),
        ("https://b\u00fccher.example/", None),
    ],
)
def test_the_browser_origin(uri: str, origin: str | None) -> None:
    assert browser_origin(uri) == origin


def test_every_origin_allowed_still_means_our_own_origin_alone() -> None:
    anyone = OriginPolicy(["*"], OWN)
    assert redirect_allowed("http://localhost:23780/cb", anyone)
    assert not redirect_allowed("https://evil.example/cb", anyone)
    assert not redirect_allowed("http://127.0.0.1:23998\\@localhost:23780/cb", anyone)
