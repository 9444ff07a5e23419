"""Driving a social login the way a browser does, against a server and fake providers."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from html import unescape
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.fakes.social import FakeProvider

PROVIDERS = (
    "google",
    "github",
    "facebook",
    "microsoft",
    "twitch",
    "linkedin",
    "apple",
    "discord",
    "twitter",
    "roblox",
)


@contextmanager
def fakes(names: Sequence[str]) -> Iterator[dict[str, FakeProvider]]:
    with ExitStack() as stack:
        yield {name: stack.enter_context(FakeProvider(name)) for name in names}


def provider_flags(found: dict[str, FakeProvider]) -> list[str]:
    flags = [flag for fake in found.values() for flag in fake.flags()]
    urls = ",".join(fake.provider_url() for fake in found.values())
    return [*flags, f"--social-provider-urls={urls}", "--app-cookie-secure=false"]


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def start(client: httpx.Client, provider: str, **params: str) -> httpx.Response:
    """``GET /oauth_login/<provider>``: the 302 to the provider (cookie kept by ``client``)."""
    return client.get(f"/oauth_login/{provider}", params=params)


def at_provider(location: str) -> httpx.Response:
    """The browser at the provider's authorize URL (the person consents at once)."""
    return httpx.get(location, timeout=30)


def back_to_server(client: httpx.Client, answer: httpx.Response) -> httpx.Response:
    """Follow the provider's answer to our callback: a redirect, or Apple's auto-posting
    form (``response_mode=form_post``), submitted as the browser would."""
    if answer.status_code == 302:
        return client.get(answer.headers["location"])
    assert answer.status_code == 200, answer.text
    action = unescape(re.search(r'action="([^"]+)"', answer.text).group(1))  # type: ignore[union-attr]
    fields = {
        unescape(name): unescape(value)
        for name, value in re.findall(r'name="([^"]+)" value="([^"]*)"', answer.text)
    }
    return client.post(action, data=fields)


def sign_in(client: httpx.Client, provider: str, **params: str) -> httpx.Response:
    """A whole social login; the answer is the callback's redirect to the application."""
    first = start(client, provider, **params)
    assert first.status_code == 302, first.text
    return back_to_server(client, at_provider(first.headers["location"]))
