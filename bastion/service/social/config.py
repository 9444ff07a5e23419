"""Which providers this server speaks to, and with what credentials (from the flags)."""

from __future__ import annotations

import dataclasses

from bastion.core.settings import Settings
from bastion.core.social.apple import AppleSigningKey, parse_apple_secret
from bastion.core.social.providers import SPECS, Provider, ProviderSpec, parse_provider_urls

__all__ = ["ProviderConfig", "configured_providers"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProviderConfig:
    spec: ProviderSpec
    client_id: str
    client_secret: str | AppleSigningKey = dataclasses.field(repr=False)
    scopes: tuple[str, ...]
    #: ``--social-provider-urls``: the origin that replaces every endpoint's own
    origin: str | None = None
    #: Microsoft's ``--microsoft-tenant-id``
    tenant: str = "common"

    @property
    def provider(self) -> Provider:
        return self.spec.provider

    def url(self, endpoint: str) -> str:
        """The URL of one of the spec's endpoints (``authorize``, ``token`` ...)."""
        found = getattr(self.spec, endpoint)
        if found is None:
            raise ValueError(f"{self.provider} has no {endpoint} endpoint")
        return str(found.url(self.origin, tenant=self.tenant))

    def issuer(self, tenant_id: str | None = None) -> str:
        """The expected ``iss`` of ID tokens. Microsoft's names the user's tenant: for the
        multi-tenant values (``common``, ``organizations``, ``consumers``) it is the
        ``tid`` of the token itself, otherwise the configured tenant."""
        if self.spec.issuer is None:
            raise ValueError(f"{self.provider} issues no ID token")
        tenant = self.tenant
        if tenant in ("common", "organizations", "consumers") and tenant_id:
            tenant = tenant_id
        return self.spec.issuer.url(self.origin, tenant=tenant)


def configured_providers(settings: Settings) -> dict[Provider, ProviderConfig]:
    """Every provider whose client id AND secret are set (exactly meta's rule)."""
    origins = parse_provider_urls(settings.social_provider_urls)
    found: dict[Provider, ProviderConfig] = {}
    for provider, spec in SPECS.items():
        client_id = getattr(settings, f"{provider.value}_client_id")
        secret: str = getattr(settings, f"{provider.value}_client_secret")
        if not (client_id and secret):
            continue
        found[provider] = ProviderConfig(
            spec=spec,
            client_id=client_id,
            client_secret=parse_apple_secret(secret) if provider is Provider.APPLE else secret,
            scopes=getattr(settings, f"{provider.value}_scopes"),
            origin=origins.get(provider),
            tenant=settings.microsoft_tenant_id or "common",
        )
    return found
