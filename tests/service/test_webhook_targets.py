"""Which webhook targets bastion may call: checked at registration and again at connect time."""

from __future__ import annotations

import ipaddress

import pytest

from bastion.service.admin.targets import (
    RefusedTarget,
    UnresolvableTarget,
    address_refusal,
    check_endpoint,
    resolve_target,
)


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("0.0.0.0", "private"),
        ("100.64.0.1", "not public"),
        ("224.0.0.1", "not routable"),
    ],
)
def test_non_public_addresses_are_refused(address: str, reason: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("ftp://example.test/x", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("http:///nohost", "no host"),
        ("http://user:pw@example.test/", "credentials"),
        ("http://example.test:99999/", "invalid port"),
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://[::1]/hook", "loopback"),
        ("http://10.0.0.5/hook", "private"),
    ],
)
def test_registration_refuses_what_it_can_see(endpoint: str, message: str) -> None:
    with pytest.raises(RefusedTarget, match=message):
        check_endpoint(endpoint, allow_private=False)


def test_registration_allows_private_literals_only_with_the_flag() -> None:
    check_endpoint("http://127.0.0.1:8080/hook", allow_private=True)
    with pytest.raises(RefusedTarget, match="http or https"):
        check_endpoint("gopher://127.0.0.1/", allow_private=True)


async def test_a_name_resolving_to_loopback_is_refused_at_connect_time() -> None:
    # A hostname passes registration; only resolving it shows where it points.
    check_endpoint("http://localhost:8080/hook", allow_private=False)
    with pytest.raises(RefusedTarget, match=r"localhost resolves to a loopback address"):
        await resolve_target("http://localhost:8080/hook", allow_private=False)


async def test_the_request_goes_to_the_checked_address_under_the_original_host() -> None:
    target = await resolve_target("http://localhost:8080/a/b?c=d#frag", allow_private=True)
    assert target.url in {"http://127.0.0.1:8080/a/b?c=d", "http://[::1]:8080/a/b?c=d"}
    assert target.host_header == "localhost:8080"
    assert target.tls_server_name is None


async def test_https_keeps_the_hostname_for_tls() -> None:
    target = await resolve_target("https://localhost/hook", allow_private=True)
    assert target.url.endswith(":443/hook")
    assert target.host_header == "localhost"
    assert target.tls_server_name == "localhost"


async def test_a_public_literal_address_is_used_as_is() -> None:
    target = await resolve_target("https://1.1.1.1/x", allow_private=False)
    assert target.url == "https://1.1.1.1:443/x"


async def test_an_unresolvable_host_is_a_retryable_failure() -> None:
    with pytest.raises(UnresolvableTarget):
        await resolve_target("http://no-such-host.invalid/x", allow_private=False)
