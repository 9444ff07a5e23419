"""What a provider says about the user, normalised to one :class:`SocialProfile`.

``email_verified`` is True only when the provider itself vouches for the address; the
login flow creates or links an account on nothing less. Per provider:

- OpenID Connect (Google, Twitch, Roblox, Apple, LinkedIn's userinfo): the
  ``email_verified`` claim (Apple sends it as the string ``"true"``).
- Microsoft: its ``email`` claim is not verified by Microsoft in general. It counts as
  verified for personal accounts (the consumer tenant) and where the ``xms_edov``
  optional claim ("email domain owner verified") is true.
- GitHub: the primary address of ``/user/emails`` when GitHub marks it verified.
- Facebook: Graph returns ``email`` only for a confirmed address.
- Discord: ``email`` with ``verified: true``.
- X (Twitter): ``confirmed_email`` (scope ``users.email``), which X has confirmed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from bastion.core.social.providers import MICROSOFT_CONSUMER_TENANT

__all__ = [
    "SocialProfile",
    "from_apple",
    "from_discord",
    "from_facebook",
    "from_github",
    "from_microsoft",
    "from_oidc",
    "from_twitter",
]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SocialProfile:
    #: the provider's stable user id
    subject: str
    email: str | None = None
    email_verified: bool = False
    given_name: str | None = None
    family_name: str | None = None
    nickname: str | None = None
    picture: str | None = None

    def __post_init__(self) -> None:
        if not self.subject:
            raise ValueError("a provider profile needs the provider's user id")

    @property
    def verified_email(self) -> str | None:
        """The address, lower-cased, if the provider vouches for it."""
        if self.email and self.email_verified:
            return self.email.strip().lower()
        return None


def _text(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
        return str(value).strip()
    return None


def _true(value: Any) -> bool:
    """A boolean claim; some providers (Apple) send ``"true"``."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _split_name(name: str | None) -> tuple[str | None, str | None]:
    if not name:
        return None, None
    first, _, rest = name.strip().partition(" ")
    return first or None, rest.strip() or None


def from_oidc(claims: Mapping[str, Any]) -> SocialProfile:
    """Standard OpenID Connect claims (ID token or userinfo)."""
    given, family = _text(claims, "given_name"), _text(claims, "family_name")
    if given is None and family is None:
        given, family = _split_name(_text(claims, "name"))
    return SocialProfile(
        subject=_text(claims, "sub") or "",
        email=_text(claims, "email"),
        email_verified=_true(claims.get("email_verified")),
        given_name=given,
        family_name=family,
        nickname=_text(claims, "nickname") or _text(claims, "preferred_username"),
        picture=_text(claims, "picture"),
    )


def from_microsoft(claims: Mapping[str, Any]) -> SocialProfile:
    profile = from_oidc(claims)
    vouched = claims.get("tid") == MICROSOFT_CONSUMER_TENANT or _true(claims.get("xms_edov"))
    return dataclasses.replace(profile, email_verified=vouched and profile.email is not None)


def from_apple(claims: Mapping[str, Any], user: Mapping[str, Any] | None) -> SocialProfile:
    """The ID token's claims; ``user`` is the JSON Apple posts with the first login only
    (``{"name": {"firstName", "lastName"}, "email"}``): the name is never in the token."""
    profile = from_oidc(claims)
    name = user.get("name") if user else None
    if isinstance(name, Mapping):
        profile = dataclasses.replace(
            profile, given_name=_text(name, "firstName"), family_name=_text(name, "lastName")
        )
    return profile


def from_github(user: Mapping[str, Any], emails: Sequence[Any]) -> SocialProfile:
    """``/user`` plus ``/user/emails``: the primary address if GitHub verified it (the
    public ``email`` of ``/user`` may be missing or unverified, so it is not used)."""
    primary = next(
        (
            e
            for e in emails
            if isinstance(e, Mapping) and e.get("primary") is True and _text(e, "email")
        ),
        None,
    )
    given, family = _split_name(_text(user, "name"))
    return SocialProfile(
        subject=_text(user, "id") or "",
        email=None if primary is None else _text(primary, "email"),
        email_verified=primary is not None and primary.get("verified") is True,
        given_name=given,
        family_name=family,
        nickname=_text(user, "login"),
        picture=_text(user, "avatar_url"),
    )


def from_facebook(me: Mapping[str, Any]) -> SocialProfile:
    picture = me.get("picture")
    data = picture.get("data") if isinstance(picture, Mapping) else None
    email = _text(me, "email")
    return SocialProfile(
        subject=_text(me, "id") or "",
        email=email,
        email_verified=email is not None,
        given_name=_text(me, "first_name"),
        family_name=_text(me, "last_name"),
        picture=_text(data, "url") if isinstance(data, Mapping) else None,
    )


def from_discord(user: Mapping[str, Any]) -> SocialProfile:
    subject, avatar = _text(user, "id"), _text(user, "avatar")
    picture = None
    if subject and avatar:
        picture = f"https://cdn.discordapp.com/avatars/{subject}/{avatar}.png"
    return SocialProfile(
        subject=subject or "",
        email=_text(user, "email"),
        email_verified=user.get("verified") is True,
        given_name=_text(user, "global_name"),
        nickname=_text(user, "username"),
        picture=picture,
    )


def from_twitter(body: Mapping[str, Any]) -> SocialProfile:
    """``/2/users/me``: ``{"data": {id, name, username, profile_image_url,
    confirmed_email}}``."""
    data = body.get("data")
    data = data if isinstance(data, Mapping) else {}
    email = _text(data, "confirmed_email")
    given, family = _split_name(_text(data, "name"))
    return SocialProfile(
        subject=_text(data, "id") or "",
        email=email,
        email_verified=email is not None,
        given_name=given,
        family_name=family,
        nickname=_text(data, "username"),
        picture=_text(data, "profile_image_url"),
    )
