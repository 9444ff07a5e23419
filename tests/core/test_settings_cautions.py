"""Start-up warnings: placeholder and short secrets, HTTPS without an https --url, several
instances (or processes) without one shared --url."""

from __future__ import annotations

from dataclasses import replace

from bastion.cli import parse_args
from bastion.core.settings.cautions import startup_cautions

STRONG = [
    "--admin-secret=an-admin-secret-long-enough",
    "--client-id=client-id",
    "--client-secret=a-client-secret-long-enough",
    "--database-type=sqlite",
    "--database-url=bastion-test.db",
    "--jwt-type=HS256",
    "--jwt-secret=a-jwt-secret-of-at-least-thirty-two-characters",
]


def cautions(*extra: str) -> list[str]:
    """The cautions for STRONG with ``extra`` flags given instead of its own."""
    names = {flag.split("=", 1)[0] for flag in extra}
    kept = [flag for flag in STRONG if flag.split("=", 1)[0] not in names]
    return startup_cautions(parse_args([*kept, *extra]))


def test_strong_secrets_on_one_instance_warn_of_nothing() -> None:
    assert cautions() == []


def test_the_readmes_placeholders_are_named() -> None:
    found = cautions("--admin-secret=change-me-admin", "--jwt-secret=change-me-jwt-secret")
    assert [c.split()[0] for c in found] == ["--admin-secret", "--jwt-secret"]
    assert all("placeholder" in c for c in found)


def test_short_secrets_are_named_with_their_minimum() -> None:
    (admin,) = cautions("--admin-secret=short")
    assert admin == "--admin-secret is shorter than 16 characters: easy to guess"
    (jwt,) = cautions("--jwt-type=HS512", "--jwt-secret=" + "x" * 40)
    assert jwt.startswith("--jwt-secret is shorter than 64 characters")


def test_tls_with_an_http_url_is_named() -> None:
    """(The certificate is not read here: the flags' check of it has its own tests.)"""
    settings = replace(parse_args(STRONG), tls_cert_file="c.pem", tls_key_file="k.pem")
    (tls,) = startup_cautions(settings)
    assert tls.startswith("--tls-cert-file serves HTTPS but the public URL is http://")
    assert startup_cautions(replace(settings, url="https://a.io")) == []


def test_workers_or_a_shared_memory_store_without_url_are_named() -> None:
    (workers,) = cautions("--workers=2", "--memory-store-url=redis://127.0.0.1:6379/0")
    assert workers.startswith("no --url: the token issuer is derived")
    assert cautions("--memory-store-url=redis://127.0.0.1:6379/0", "--url=https://a.io") == []
