"""The ten identity providers: where each one's endpoints are and how it is spoken to.

Every endpoint is an origin plus a path, so that ``--social-provider-urls`` can send a
provider's every request (authorize, token, profile, keys) and its expected ID-token
issuer to another origin (a local fake in tests, an egress proxy) with the same paths.
Default scopes are the ``--<provider>-scopes`` defaults; see the README's "Social login".
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

__all__ = [
    "MICROSOFT_CONSUMER_TENANT",
    "SPECS",
    "ClientAuth",
    "Endpoint",
    "ProfileSource",
    "Provider",
    "ProviderSpec",
    "parse_provider_urls",
]

#: The tenant of personal Microsoft accounts, whose addresses Microsoft has verified.
MICROSOFT_CONSUMER_TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"


class Provider(enum.StrEnum):
    """A social identity provider; its value is the route segment, the flag prefix, the
    ``signup_methods`` entry and the ``login_method`` of its sessions."""

    GOOGLE = "google"
    GITHUB = "github"
    FACEBOOK = "facebook"
    MICROSOFT = "microsoft"
    TWITCH = "twitch"
    LINKEDIN = "linkedin"
    APPLE = "apple"
    DISCORD = "discord"
    TWITTER = "twitter"
    ROBLOX = "roblox"


class ProfileSource(enum.Enum):
    """Where the user's identity comes from after the code exchange."""

    #: the ID token, verified against the provider's keys (issuer, audience, nonce)
    ID_TOKEN = "id_token"
    #: the OpenID Connect userinfo endpoint
    USERINFO = "userinfo"
    #: GitHub's ``/user`` and, for the address, ``/user/emails``
    GITHUB = "github"
    #: Facebook Graph ``/me?fields=...``
    FACEBOOK = "facebook"
    #: Discord ``/users/@me``
    DISCORD = "discord"
    #: X ``/2/users/me``
    TWITTER = "twitter"


class ClientAuth(enum.Enum):
    """How the client authenticates at the token endpoint (RFC 6749 2.3.1)."""

    #: ``client_id`` and ``client_secret`` in the form body
    POST = "client_secret_post"
    #: HTTP Basic with ``client_id:client_secret``
    BASIC = "client_secret_basic"


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    origin: str
    path: str

    def url(self, origin: str | None = None, **values: str) -> str:
        """The URL at ``origin`` (the override, if any); ``{tenant}``-style placeholders
        in the path are filled from ``values``."""
        return (origin or self.origin) + self.path.format(**values)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ProviderSpec:
    provider: Provider
    authorize: Endpoint
    token: Endpoint
    profile_source: ProfileSource
    #: the profile API or userinfo endpoint (not for ID-token providers)
    profile: Endpoint | None = None
    #: GitHub's address list
    emails: Endpoint | None = None
    jwks: Endpoint | None = None
    #: the expected ``iss`` of ID tokens (Microsoft's carries ``{tenant}``)
    issuer: Endpoint | None = None
    client_auth: ClientAuth = ClientAuth.POST
    #: send an S256 PKCE challenge (RFC 7636); Twitter refuses a flow without one
    pkce: bool = False
    #: send and check an OpenID Connect ``nonce``
    nonce: bool = False
    #: Facebook documents a GET token request
    token_method: str = "POST"
    #: Apple posts the callback (``response_mode=form_post``)
    response_mode: str | None = None
    #: fixed extra authorize parameters
    authorize_params: tuple[tuple[str, str], ...] = ()


_GRAPH = "https://graph.facebook.com"
_MS = "https://login.microsoftonline.com"
_TWITCH = "https://id.twitch.tv"
_APPLE = "https://appleid.apple.com"
_ROBLOX = "https://apis.roblox.com"
_DISCORD = "https://discord.com"
#: Twitch puts e-mail claims in the ID token only when asked through ``claims``.
_TWITCH_CLAIMS = (
    '{"id_token":{"email":null,"email_verified":null,"preferred_username":null,"picture":null}}'
)

SPECS: Mapping[Provider, ProviderSpec] = {
    spec.provider: spec
    for spec in (
        ProviderSpec(
            provider=Provider.GOOGLE,
            authorize=Endpoint("https://accounts.google.com", "/o/oauth2/v2/auth"),
            token=Endpoint("https://oauth2.googleapis.com", "/token"),
            jwks=Endpoint("https://www.googleapis.com", "/oauth2/v3/certs"),
            issuer=Endpoint("https://accounts.google.com", ""),
            profile_source=ProfileSource.ID_TOKEN,
            pkce=True,
            nonce=True,
        ),
        ProviderSpec(
            provider=Provider.GITHUB,
            authorize=Endpoint("https://github.com", "/login/oauth/authorize"),
            token=Endpoint("https://github.com", "/login/oauth/access_token"),
            profile=Endpoint("https://api.github.com", "/user"),
            emails=Endpoint("https://api.github.com", "/user/emails"),
            profile_source=ProfileSource.GITHUB,
            pkce=True,
        ),
        ProviderSpec(
            provider=Provider.FACEBOOK,
            authorize=Endpoint("https://www.facebook.com", "/v21.0/dialog/oauth"),
            token=Endpoint(_GRAPH, "/v21.0/oauth/access_token"),
            profile=Endpoint(_GRAPH, "/v21.0/me"),
            profile_source=ProfileSource.FACEBOOK,
            token_method="GET",
            pkce=True,
        ),
        ProviderSpec(
            provider=Provider.MICROSOFT,
            authorize=Endpoint(_MS, "/{tenant}/oauth2/v2.0/authorize"),
            token=Endpoint(_MS, "/{tenant}/oauth2/v2.0/token"),
            jwks=Endpoint(_MS, "/{tenant}/discovery/v2.0/keys"),
            issuer=Endpoint(_MS, "/{tenant}/v2.0"),
            profile_source=ProfileSource.ID_TOKEN,
            pkce=True,
            nonce=True,
        ),
        ProviderSpec(
            provider=Provider.TWITCH,
            authorize=Endpoint(_TWITCH, "/oauth2/authorize"),
            token=Endpoint(_TWITCH, "/oauth2/token"),
            jwks=Endpoint(_TWITCH, "/oauth2/keys"),
            issuer=Endpoint(_TWITCH, "/oauth2"),
            profile_source=ProfileSource.ID_TOKEN,
            nonce=True,
            authorize_params=(("claims", _TWITCH_CLAIMS),),
        ),
        ProviderSpec(
            provider=Provider.LINKEDIN,
            authorize=Endpoint("https://www.linkedin.com", "/oauth/v2/authorization"),
            token=Endpoint("https://www.linkedin.com", "/oauth/v2/accessToken"),
            profile=Endpoint("https://api.linkedin.com", "/v2/userinfo"),
            profile_source=ProfileSource.USERINFO,
        ),
        ProviderSpec(
            provider=Provider.APPLE,
            authorize=Endpoint(_APPLE, "/auth/authorize"),
            token=Endpoint(_APPLE, "/auth/token"),
            jwks=Endpoint(_APPLE, "/auth/keys"),
            issuer=Endpoint(_APPLE, ""),
            profile_source=ProfileSource.ID_TOKEN,
            nonce=True,
            response_mode="form_post",
        ),
        ProviderSpec(
            provider=Provider.DISCORD,
            authorize=Endpoint(_DISCORD, "/oauth2/authorize"),
            token=Endpoint(_DISCORD, "/api/oauth2/token"),
            profile=Endpoint(_DISCORD, "/api/users/@me"),
            profile_source=ProfileSource.DISCORD,
        ),
        ProviderSpec(
            provider=Provider.TWITTER,
            authorize=Endpoint("https://x.com", "/i/oauth2/authorize"),
            token=Endpoint("https://api.x.com", "/2/oauth2/token"),
            profile=Endpoint(
                "https://api.x.com",
                "/2/users/me?user.fields=confirmed_email,name,profile_image_url,username",
            ),
            profile_source=ProfileSource.TWITTER,
            client_auth=ClientAuth.BASIC,
            pkce=True,
        ),
        ProviderSpec(
            provider=Provider.ROBLOX,
            authorize=Endpoint(_ROBLOX, "/oauth/v1/authorize"),
            token=Endpoint(_ROBLOX, "/oauth/v1/token"),
            jwks=Endpoint(_ROBLOX, "/oauth/v1/certs"),
            issuer=Endpoint(_ROBLOX, "/oauth/"),
            profile_source=ProfileSource.ID_TOKEN,
            pkce=True,
            nonce=True,
        ),
    )
}


def parse_provider_urls(items: tuple[str, ...]) -> dict[Provider, str]:
    """``--social-provider-urls`` items (``provider=http(s)://host[:port][/prefix]``) as a
    map; raises ValueError naming the bad item."""
    found: dict[Provider, str] = {}
    for item in items:
        name, sep, url = item.partition("=")
        name, url = name.strip().lower(), url.strip().rstrip("/")
        if not sep or name not in Provider.__members__.values():
            raise ValueError(f"{item!r}: expected <provider>=<url> with a known provider")
        if not url.startswith(("http://", "https://")) or "?" in url or "#" in url:
            raise ValueError(f"{item!r}: the url must be http(s) without query or fragment")
        found[Provider(name)] = url
    return found
