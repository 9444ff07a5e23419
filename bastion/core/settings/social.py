"""The social login flags: each provider's client id, secret and scopes.

Declared apart from the rest of :class:`~bastion.core.settings.declaration.Settings`
(which inherits them) to keep that module readable."""

from __future__ import annotations

from dataclasses import dataclass

from bastion.core.settings.vocabulary import NONE_SHOWN, Group, flag_field

_SO = Group.SOCIAL


@dataclass(frozen=True, kw_only=True)
class SocialFlags:
    google_client_id: str = flag_field("", _SO, "Google OAuth client id.")
    google_client_secret: str = flag_field("", _SO, "Google OAuth client secret.")
    google_scopes: tuple[str, ...] = flag_field(
        ("openid", "profile", "email"), _SO, "Google scopes."
    )
    github_client_id: str = flag_field("", _SO, "GitHub OAuth client id.")
    github_client_secret: str = flag_field("", _SO, "GitHub OAuth client secret.")
    github_scopes: tuple[str, ...] = flag_field(("read:user", "user:email"), _SO, "GitHub scopes.")
    facebook_client_id: str = flag_field("", _SO, "Facebook OAuth client id.")
    facebook_client_secret: str = flag_field("", _SO, "Facebook OAuth client secret.")
    facebook_scopes: tuple[str, ...] = flag_field(
        ("public_profile", "email"), _SO, "Facebook scopes."
    )
    microsoft_client_id: str = flag_field("", _SO, "Microsoft OAuth client id.")
    microsoft_client_secret: str = flag_field("", _SO, "Microsoft OAuth client secret.")
    microsoft_scopes: tuple[str, ...] = flag_field(
        ("openid", "profile", "email"), _SO, "Microsoft scopes."
    )
    microsoft_tenant_id: str = flag_field("common", _SO, "Microsoft tenant.")
    twitch_client_id: str = flag_field("", _SO, "Twitch OAuth client id.")
    twitch_client_secret: str = flag_field("", _SO, "Twitch OAuth client secret.")
    twitch_scopes: tuple[str, ...] = flag_field(
        ("openid", "user:read:email"), _SO, "Twitch scopes."
    )
    linkedin_client_id: str = flag_field("", _SO, "LinkedIn OAuth client id.")
    linkedin_client_secret: str = flag_field("", _SO, "LinkedIn OAuth client secret.")
    linkedin_scopes: tuple[str, ...] = flag_field(
        ("openid", "profile", "email"), _SO, "LinkedIn scopes (OpenID Connect)."
    )
    apple_client_id: str = flag_field("", _SO, "Apple client id.")
    apple_client_secret: str = flag_field(
        "", _SO, "Apple: <team id>:<key id>:<PEM private key>, or a signed client-secret JWT."
    )
    apple_scopes: tuple[str, ...] = flag_field(("email", "name"), _SO, "Apple scopes.")
    discord_client_id: str = flag_field("", _SO, "Discord OAuth client id.")
    discord_client_secret: str = flag_field("", _SO, "Discord OAuth client secret.")
    discord_scopes: tuple[str, ...] = flag_field(("identify", "email"), _SO, "Discord scopes.")
    twitter_client_id: str = flag_field("", _SO, "Twitter OAuth client id.")
    twitter_client_secret: str = flag_field("", _SO, "Twitter OAuth client secret.")
    twitter_scopes: tuple[str, ...] = flag_field(
        ("tweet.read", "users.read", "users.email"), _SO, "Twitter (X) scopes."
    )
    roblox_client_id: str = flag_field("", _SO, "Roblox OAuth client id.")
    roblox_client_secret: str = flag_field("", _SO, "Roblox OAuth client secret.")
    roblox_scopes: tuple[str, ...] = flag_field(("openid", "profile"), _SO, "Roblox scopes.")
    social_provider_urls: tuple[str, ...] = flag_field(
        (),
        _SO,
        "Advanced: provider=URL pairs; that provider's endpoints and ID-token issuer move to "
        "URL, same paths (a local test double, an egress proxy).",
        shown_default=NONE_SHOWN,
    )
