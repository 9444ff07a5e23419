"""Token claims, exactly as the reference (§5.2) gives them; signing happens elsewhere.

The runtime signs what these functions return (``joserfc``) and verifies signatures; the
checks on the claims themselves (issuer, audience, subject, nonce, type, expiry) are here.
The issuer is always ``--url`` (reference surprise 5 fixed), never a request header.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from bastion.core.auth.policy import AuthPolicy
from bastion.core.auth.user import SignupMethod, User
from bastion.core.auth.verification import VerificationRequest

__all__ = [
    "DEFAULT_SCOPE",
    "RESERVED_CLAIMS",
    "SESSION_TTL",
    "TokenType",
    "access_token_claims",
    "amr_for",
    "claims_are_valid",
    "expires_in",
    "id_token_claims",
    "left_half_hash",
    "link_request",
    "login_method_for",
    "merge_custom_claims",
    "refresh_token_claims",
    "session_claims",
    "verification_token_claims",
    "wants_refresh_token",
]

DEFAULT_SCOPE: tuple[str, ...] = ("openid", "email", "profile")
#: The browser session blob lives 24 hours.
SESSION_TTL = 24 * 60 * 60
#: Claims a custom access-token script can never set or override.
RESERVED_CLAIMS = frozenset(
    {
        "sub",
        "iss",
        "aud",
        "exp",
        "iat",
        "token_type",
        "roles",
        "allowed_roles",
        "scope",
        "nonce",
        "login_method",
        "at_hash",
        "c_hash",
        "auth_time",
        "amr",
        "acr",
    }
)


class TokenType(enum.StrEnum):
    ACCESS = "access_token"
    ID = "id_token"
    REFRESH = "refresh_token"


def login_method_for(method: SignupMethod) -> str:
    """The ``login_method`` claim and session-key prefix (reference surprise 21, kept):
    password logins are ``basic_auth`` whether by email or by phone."""
    if method is SignupMethod.MOBILE_BASIC_AUTH:
        return SignupMethod.BASIC_AUTH.value
    return method.value


def amr_for(login_method: str) -> list[str]:
    if login_method in (SignupMethod.BASIC_AUTH, SignupMethod.MOBILE_BASIC_AUTH):
        return ["pwd"]
    if login_method in (SignupMethod.MAGIC_LINK_LOGIN, SignupMethod.MOBILE_OTP):
        return ["otp"]
    if login_method == "webauthn":
        return ["hwk", "user"]  # RFC 8176: a key held in hardware, the user verified
    return ["fed"]


def wants_refresh_token(scope: Sequence[str]) -> bool:
    return "offline_access" in scope


def expires_in(exp: int, now: int) -> int:
    return max(1, exp - now)


def _base(
    policy: AuthPolicy, *, subject: str, token_type: str, nonce: str, now: int, ttl: int
) -> dict[str, Any]:
    return {
        "iss": policy.issuer,
        "aud": policy.client_id,
        "sub": subject,
        "iat": now,
        "exp": now + ttl,
        "token_type": token_type,
        "nonce": nonce,
    }


def _session_token_claims(
    *,
    policy: AuthPolicy,
    token_type: TokenType,
    ttl: int,
    user: User,
    roles: Sequence[str],
    scope: Sequence[str],
    login_method: str,
    nonce: str,
    now: int,
) -> dict[str, Any]:
    """Access and refresh tokens carry the same claims; only their type and lifetime differ."""
    claims = _base(policy, subject=user.id, token_type=token_type, nonce=nonce, now=now, ttl=ttl)
    claims.update(
        roles=list(roles),
        allowed_roles=list(user.roles),
        scope=list(scope),
        login_method=login_method,
    )
    return claims


def access_token_claims(
    *,
    policy: AuthPolicy,
    user: User,
    roles: Sequence[str],
    scope: Sequence[str],
    login_method: str,
    nonce: str,
    now: int,
) -> dict[str, Any]:
    return _session_token_claims(
        policy=policy,
        token_type=TokenType.ACCESS,
        ttl=policy.access_token_ttl,
        user=user,
        roles=roles,
        scope=scope,
        login_method=login_method,
        nonce=nonce,
        now=now,
    )


def refresh_token_claims(
    *,
    policy: AuthPolicy,
    user: User,
    roles: Sequence[str],
    scope: Sequence[str],
    login_method: str,
    nonce: str,
    now: int,
    auth_time: int | None = None,
) -> dict[str, Any]:
    """Like the access token's, plus ``auth_time``: a refresh keeps the time the user
    authenticated (OIDC ``max_age`` is measured from it)."""
    claims = _session_token_claims(
        policy=policy,
        token_type=TokenType.REFRESH,
        ttl=policy.refresh_token_ttl,
        user=user,
        roles=roles,
        scope=scope,
        login_method=login_method,
        nonce=nonce,
        now=now,
    )
    claims["auth_time"] = now if auth_time is None else auth_time
    return claims


def id_token_claims(
    *,
    policy: AuthPolicy,
    user: User,
    roles: Sequence[str],
    login_method: str,
    nonce: str,
    now: int,
    access_token: str,
    alg: str,
    oidc_nonce: str | None = None,
    code: str | None = None,
    auth_time: int | None = None,
) -> dict[str, Any]:
    """The ID token: every public user field but ``roles`` (which go under
    ``--jwt-role-claim``, surprise 4 kept), plus the OIDC claims."""
    profile = user.to_api_dict()
    del profile["roles"]
    claims: dict[str, Any] = profile
    claims.update(
        _base(
            policy,
            subject=user.id,
            token_type=TokenType.ID,
            nonce=oidc_nonce or nonce,
            now=now,
            ttl=policy.access_token_ttl,
        )
    )
    claims[policy.jwt_role_claim] = list(roles)
    claims.update(
        allowed_roles=list(user.roles),
        login_method=login_method,
        at_hash=left_half_hash(access_token, alg),
        auth_time=now if auth_time is None else auth_time,
        amr=amr_for(login_method),
        acr="0",
    )
    if code is not None:
        claims["c_hash"] = left_half_hash(code, alg)
    return claims


def verification_token_claims(
    *,
    policy: AuthPolicy,
    email: str,
    identifier: str,
    nonce: str,
    redirect_uri: str,
    now: int,
) -> dict[str, Any]:
    """The emailed link's JWT: ``sub`` is the email, ``token_type`` the identifier."""
    claims = _base(
        policy,
        subject=email,
        token_type=identifier,
        nonce=nonce,
        now=now,
        ttl=policy.verification_ttl,
    )
    claims["redirect_uri"] = redirect_uri
    return claims


def session_claims(
    *,
    user: User,
    roles: Sequence[str],
    scope: Sequence[str],
    login_method: str,
    nonce: str,
    now: int,
    auth_time: int | None = None,
) -> dict[str, Any]:
    """The browser session blob, encrypted into the ``cookie_session`` value. ``auth_time``
    (when the user authenticated) survives rotations; ``iat`` is this blob's own."""
    return {
        "sub": user.id,
        "roles": list(roles),
        "scope": list(scope),
        "nonce": nonce,
        "iat": now,
        "exp": now + SESSION_TTL,
        "login_method": login_method,
        "auth_time": now if auth_time is None else auth_time,
    }


def merge_custom_claims(
    claims: Mapping[str, Any], custom: Mapping[str, Any], *, role_claim: str = "role"
) -> dict[str, Any]:
    """Add a custom script's claims; reserved ones (and the role claim) stay ours."""
    merged = dict(claims)
    for key, value in custom.items():
        if key not in RESERVED_CLAIMS and key != role_claim:
            merged[key] = value
    return merged


def claims_are_valid(
    claims: Mapping[str, Any],
    *,
    policy: AuthPolicy,
    token_type: str,
    now: int,
    subject: str | None = None,
    nonce: str | None = None,
) -> bool:
    """Issuer, audience, type, expiry and (when given) subject and nonce all match."""
    exp, iat = claims.get("exp"), claims.get("iat")
    if type(exp) is not int or type(iat) is not int or exp <= now:
        return False
    checks = [
        (claims.get("iss"), policy.issuer),
        (claims.get("aud"), policy.client_id),
        (claims.get("token_type"), token_type),
    ]
    if subject is not None:
        checks.append((claims.get("sub"), subject))
    if nonce is not None:
        checks.append((claims.get("nonce"), nonce))
    return all(isinstance(got, str) and _same(got, want) for got, want in checks)


def link_request(
    request: VerificationRequest | None,
    claims: Mapping[str, Any] | None,
    *,
    purposes: Collection[str],
    policy: AuthPolicy,
    now: int,
) -> VerificationRequest | None:
    """The stored request behind an emailed link, if the link is one of ``purposes`` and
    its token (``claims``, signature already checked) matches the request: issuer,
    audience, type, expiry, subject and nonce. Else None."""
    if request is None or claims is None or request.identifier not in purposes:
        return None
    valid = claims_are_valid(
        claims,
        policy=policy,
        token_type=request.identifier,
        now=now,
        subject=request.email,
        nonce=request.nonce,
    )
    return request if valid else None


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


_HASHES = {"256": hashlib.sha256, "384": hashlib.sha384, "512": hashlib.sha512}


def left_half_hash(value: str, alg: str) -> str:
    """OIDC ``at_hash`` / ``c_hash``: base64url of the left half of the alg's hash."""
    digest_of = _HASHES.get(alg[-3:])
    if digest_of is None:
        raise ValueError(f"unsupported alg {alg!r}")
    digest = digest_of(value.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest[: len(digest) // 2]).rstrip(b"=").decode("ascii")
