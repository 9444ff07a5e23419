"""What start-up logs as a warning: settings that are allowed but probably not meant."""

from __future__ import annotations

from bastion.core.settings.declaration import Settings, default_url
from bastion.core.sites import insecure_origins

__all__ = ["PLACEHOLDER_PREFIX", "startup_cautions"]

#: The README's and the examples' secrets all start so: fine for a first try, never kept.
PLACEHOLDER_PREFIX = "change-me"
#: Shortest secrets not warned about: an HMAC key of at least the hash's size (RFC 7518
#: section 3.2: 256 bits for HS256, more for HS384 and HS512); 16 characters for the
#: admin and client secrets, which are compared, never used as keys.
_HMAC_MINIMUM = {"HS256": 32, "HS384": 48, "HS512": 64}
_SECRET_MINIMUM = 16


def startup_cautions(s: Settings) -> list[str]:
    """Each a sentence naming the flag to change."""
    url_given = s.url != default_url(s.host, s.http_port)
    cautions = [
        f"--allowed-origins lists {origin}: plain http outside this machine, so the "
        "cookies and tokens it is trusted with travel unencrypted"
        for origin in insecure_origins(s.allowed_origins)
    ]
    cautions.extend(_secret_cautions(s))
    if s.tls_cert_file and s.url.startswith("http://"):
        cautions.append(
            f"--tls-cert-file serves HTTPS but the public URL is {s.url}: tokens, discovery "
            "and mailed links name an http issuer; set --url to the https address clients use"
        )
    if not url_given and (s.workers > 1 or s.memory_store_kind == "redis"):
        cautions.append(
            f"no --url: the token issuer is derived from this instance's address ({s.url}); "
            "instances sharing a memory store or a balancer refuse each other's tokens "
            "unless they all name the same public --url"
        )
    return cautions


def _secret_cautions(s: Settings) -> list[str]:
    secrets = [("--admin-secret", s.admin_secret, _SECRET_MINIMUM),
               ("--client-secret", s.client_secret, _SECRET_MINIMUM)]  # fmt: skip
    if s.webhook_secret:
        secrets.append(("--webhook-secret", s.webhook_secret, _SECRET_MINIMUM))
    if s.jwt_secret:
        secrets.append(("--jwt-secret", s.jwt_secret, _HMAC_MINIMUM.get(s.jwt_type, 32)))
    cautions = []
    for flag, value, minimum in secrets:
        if value.lower().startswith(PLACEHOLDER_PREFIX):
            cautions.append(
                f"{flag} is a placeholder from the README or an example ({PLACEHOLDER_PREFIX}"
                "...): anyone who read it holds it; set a secret of your own"
            )
        elif len(value) < minimum:
            cautions.append(f"{flag} is shorter than {minimum} characters: easy to guess")
    return cautions
