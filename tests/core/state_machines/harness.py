"""A test kit for the flow machines: fixed ports, fixtures of users and tokens, and a
finite set of sample events per event type (across every flow), so that a generic test can
feed any machine any event, and an exhaustive search can walk every table edge.

Samples are built as "the usual value plus one deviation at a time", which is what reaches
every branch of a handler without a combinatorial explosion.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bastion.core.auth import otp
from bastion.core.auth.claims import refresh_token_claims, session_claims, verification_token_claims
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.mfa import Challenge, Method, Purpose
from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.auth.responses import IssuedTokens
from bastion.core.auth.user import User
from bastion.core.auth.verification import VerificationRequest
from bastion.core.social.profile import SocialProfile
from bastion.core.social.providers import Provider
from bastion.core.state_machines._machine import Event
from bastion.core.state_machines.events import (
    PasswordHashed,
    PasswordVerified,
    RelationsChecked,
    StoredTokenLoaded,
    TokensIssued,
    UserAlreadyExists,
    UserCreated,
    UserLoaded,
    VerificationRequestCreated,
    VerificationRequestLoaded,
)
from bastion.core.state_machines.login import (
    LoginRequested,
    SecondFactorNotRequired,
    SecondFactorRequired,
)
from bastion.core.state_machines.magic_link import MagicLinkRequested
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    ChallengeLoaded,
    ChallengeTaken,
    CodeChecked,
)
from bastion.core.state_machines.password_reset import (
    ForgotPasswordRequested,
    ResetPasswordRequested,
)
from bastion.core.state_machines.session import (
    LogoutRequested,
    RefreshRequested,
    RevokeRequested,
    SessionRef,
    SessionRequested,
)
from bastion.core.state_machines.signup import SignupRequested
from bastion.core.state_machines.social_login import SocialLoginRequested
from bastion.core.state_machines.verification import (
    ResendVerifyEmailRequested,
    VerifyEmailRequested,
)

NOW = 1_700_000_000
URL = "https://auth.example.com"
CLIENT_ID = "client-123"
EMAIL = "ann@example.com"
PHONE = "+15551234567"
STRONG = "Str0ng!pw"
STORED = "stored-token-value"
#: a texted code as submitted to ``reset_password``
SMS_CODE = "918273"


@dataclasses.dataclass
class FixedClock:
    at: float = NOW

    def now(self) -> float:
        return self.at


@dataclasses.dataclass
class CountingIds:
    """Ids ``id-1``, ``id-2`` ... so effects can be asserted exactly."""

    issued: int = 0

    def new_id(self) -> str:
        self.issued += 1
        return f"id-{self.issued}"


def policy(**overrides: Any) -> AuthPolicy:
    base: dict[str, Any] = {
        "url": URL,
        "client_id": CLIENT_ID,
        "roles": ("user", "editor", "admin"),
        "default_roles": ("user",),
        "protected_roles": ("admin",),
    }
    base.update(overrides)
    return AuthPolicy(**base)


def env(**overrides: Any) -> FlowEnv:
    return FlowEnv(policy=policy(**overrides), clock=FixedClock(), ids=CountingIds())


def user(**overrides: Any) -> User:
    base: dict[str, Any] = {
        "id": "user-1",
        "email": EMAIL,
        "email_verified_at": NOW - 100,
        "phone_number": None,
        "password_hash": "$argon2id$stored",
        "signup_methods": ("basic_auth",),
        "roles": ("user", "editor"),
        "created_at": NOW - 1000,
        "updated_at": NOW - 1000,
    }
    base.update(overrides)
    return User(**base)


def tokens(*, refresh: bool = False, nonce: str = "id-1") -> IssuedTokens:
    return IssuedTokens(
        nonce=nonce,
        access_token="access.jwt",
        id_token="id.jwt",
        refresh_token="refresh.jwt" if refresh else None,
        session_token="session-blob",
        expires_in=1800,
    )


def request_row(
    identifier: EmailEvent = EmailEvent.BASIC_AUTH_SIGNUP, **kw: Any
) -> VerificationRequest:
    base: dict[str, Any] = {
        "id": "vr-1",
        "identifier": identifier.value,
        "email": EMAIL,
        "nonce": "vr-nonce",
        "redirect_uri": f"{URL}/app",
        "expires_at": NOW + 1800,
    }
    base.update(kw)
    return VerificationRequest(**base)


def link_claims(row: VerificationRequest, **overrides: Any) -> dict[str, Any]:
    claims = verification_token_claims(
        policy=policy(),
        email=row.email,
        identifier=row.identifier,
        nonce=row.nonce,
        redirect_uri=row.redirect_uri,
        now=NOW - 10,
    )
    claims.update(overrides)
    return claims


def cookie_claims(**overrides: Any) -> dict[str, Any]:
    claims = session_claims(
        user=user(),
        roles=("user",),
        scope=("openid", "offline_access"),
        login_method="basic_auth",
        nonce="old-nonce",
        now=NOW - 10,
    )
    claims.update(overrides)
    return claims


def refresh_claims(**overrides: Any) -> dict[str, Any]:
    claims = refresh_token_claims(
        policy=policy(),
        user=user(),
        roles=("user",),
        scope=("openid", "offline_access"),
        login_method="basic_auth",
        nonce="old-nonce",
        now=NOW - 10,
    )
    claims.update(overrides)
    return claims


# -- samples --------------------------------------------------------------------------------


def variants(cls: type[Event], base: dict[str, Any], **deviations: Sequence[Any]) -> list[Event]:
    """``cls(**base)``, then one event per deviating value of one field at a time."""
    events = [cls(**base)]
    for field, values in deviations.items():
        events.extend(cls(**{**base, field: value}) for value in values)
    return events


#: policies the exhaustive walk runs under: permissive, then one switch flipped at a time
POLICIES: list[AuthPolicy] = [
    policy(
        enable_magic_link_login=True,
        email_enabled=True,
        sms_enabled=True,
        enable_phone_verification=True,
    ),
    policy(enable_magic_link_login=True, email_enabled=True, enable_email_verification=True),
    policy(enable_signup=False, enable_magic_link_login=True, email_enabled=True),
    policy(enable_basic_authentication=False, enable_magic_link_login=True, email_enabled=True),
    policy(enable_mobile_basic_authentication=False),
    policy(enable_strong_password=False, enforce_mfa=False),
    policy(),
]

_SIGNUP = {"email": EMAIL, "password": STRONG, "confirm_password": STRONG}
_RESET = {"token": "link.jwt", "password": STRONG, "confirm_password": STRONG}
_BY_CODE = {"challenge_id": "ch-1", "otp": SMS_CODE, "phone_number": PHONE, **_RESET}
del _BY_CODE["token"]
_REF = SessionRef(user_id="user-1", login_method="basic_auth", nonce="old-nonce")


def reset_challenge(**overrides: Any) -> Challenge:
    """The challenge ``forgot_password`` by phone leaves behind."""
    base: dict[str, Any] = {
        "id": "ch-1",
        "user_id": "user-1",
        "method": Method.SMS_OTP,
        "purpose": Purpose.PASSWORD_RESET,
        "phone_number": PHONE,
        "login_method": "mobile_otp",
        "auth_recipe": "mobile_basic_auth",
        "code_digest": "d" * 64,
        "issued_at": NOW - 60,
        "expires_at": NOW - 60 + otp.OTP_TTL,
    }
    base.update(overrides)
    return Challenge(**base)


def _loaded_requests() -> list[Event]:
    """Valid reset and signup links first (see ``USUAL``), then everything else."""
    order = [EmailEvent.FORGOT_PASSWORD, EmailEvent.BASIC_AUTH_SIGNUP]
    order += [e for e in EmailEvent if e not in order]
    events: list[Event] = []
    for identifier in order:
        row = request_row(identifier)
        events.append(VerificationRequestLoaded(request=row, claims=link_claims(row)))
    row = request_row(EmailEvent.FORGOT_PASSWORD)
    events.extend(
        VerificationRequestLoaded(request=row, claims=claims)
        for claims in (None, link_claims(row, nonce="forged"), link_claims(row, exp=NOW - 1))
    )
    events.append(VerificationRequestLoaded(request=None))
    return events


SAMPLES: dict[type[Event], list[Event]] = {
    LoginRequested: [
        *variants(
            LoginRequested,
            {"email": EMAIL, "password": STRONG},
            email=[None, "  ANN@Example.com "],
            phone_number=[PHONE],
            roles=[("editor",), ("admin",)],
            scope=[("openid", "offline_access")],
            state=["authz-state"],
        ),
        LoginRequested(phone_number=PHONE, password=STRONG),
    ],
    SignupRequested: variants(
        SignupRequested,
        _SIGNUP,
        email=[None, "not-an-email"],
        phone_number=[PHONE, "123"],
        confirm_password=["different"],
        roles=[("editor",), ("admin",), ("ghost",)],
        scope=[("openid", "offline_access")],
        given_name=["Ann <b>"],
        is_multi_factor_auth_enabled=[False],
    )
    + [SignupRequested(email=EMAIL, password=p, confirm_password=p) for p in ("x", "abcdef")]
    + [SignupRequested(phone_number=PHONE, password=STRONG, confirm_password=STRONG)],
    SecondFactorNotRequired: [SecondFactorNotRequired()],
    SecondFactorRequired: [SecondFactorRequired(method=Method.TOTP)],
    UserLoaded: [
        UserLoaded(user=u)
        for u in (
            user(),
            None,
            user(revoked_timestamp=NOW - 5),
            user(email_verified_at=None),
            user(signup_methods=("magic_link_login",), password_hash=None),
            user(
                phone_number=PHONE,
                phone_number_verified_at=NOW - 5,
                signup_methods=("basic_auth", "mobile_basic_auth"),
            ),
            user(phone_number=PHONE, signup_methods=("mobile_basic_auth",)),
        )
    ],
    PasswordVerified: [
        PasswordVerified(ok=True),
        PasswordVerified(ok=True, needs_rehash=True),
        PasswordVerified(ok=False),
    ],
    PasswordHashed: [PasswordHashed(password_hash="$argon2id$new")],
    UserCreated: [UserCreated(user=user(email_verified_at=None, phone_number=PHONE))],
    UserAlreadyExists: [UserAlreadyExists()],
    TokensIssued: [TokensIssued(tokens=tokens()), TokensIssued(tokens=tokens(refresh=True))],
    VerificationRequestCreated: [VerificationRequestCreated(token="link.jwt")],
    VerificationRequestLoaded: _loaded_requests(),
    StoredTokenLoaded: [
        StoredTokenLoaded(token=STORED),
        StoredTokenLoaded(token=None),
        StoredTokenLoaded(token="something-else"),
    ],
    RelationsChecked: [RelationsChecked(allowed=True), RelationsChecked(allowed=False)],
    VerifyEmailRequested: variants(
        VerifyEmailRequested,
        {"token": "link.jwt"},
        roles=[("editor",), ("admin",)],
        state=["authz-state"],
    ),
    ResendVerifyEmailRequested: variants(
        ResendVerifyEmailRequested,
        {"email": EMAIL, "identifier": "basic_auth_signup"},
        email=["nope"],
        identifier=["forgot_password", "bogus"],
    ),
    MagicLinkRequested: variants(
        MagicLinkRequested,
        {"email": EMAIL},
        email=["nope"],
        roles=[("editor",), ("admin",)],
        state=["authz-state"],
        redirect_uri=["https://app.example.com/cb"],
    ),
    ForgotPasswordRequested: [
        *variants(
            ForgotPasswordRequested,
            {"email": EMAIL},
            email=[None, "nope"],
            redirect_uri=["https://app.example.com/reset"],
        ),
        ForgotPasswordRequested(phone_number=PHONE),
    ],
    ResetPasswordRequested: [
        ResetPasswordRequested(**_RESET),
        ResetPasswordRequested(**_BY_CODE),
        *variants(
            ResetPasswordRequested, _RESET, confirm_password=["mismatch"], password=["abcdef"]
        )[1:],
        ResetPasswordRequested(password=STRONG, confirm_password=STRONG),
        ResetPasswordRequested(otp="ABC123", password=STRONG, confirm_password=STRONG),
        ResetPasswordRequested(
            otp="ABC123", phone_number=PHONE, password=STRONG, confirm_password=STRONG
        ),
        ResetPasswordRequested(**{**_BY_CODE, "confirm_password": "mismatch"}),
    ],
    ChallengeLoaded: [
        ChallengeLoaded(challenge=reset_challenge()),
        ChallengeLoaded(challenge=None),
        ChallengeLoaded(challenge=reset_challenge(expires_at=NOW)),
        ChallengeLoaded(challenge=reset_challenge(purpose=Purpose.LOGIN)),
        ChallengeLoaded(challenge=reset_challenge(phone_number="+15550000000")),
    ],
    AttemptCounted: [
        AttemptCounted(attempts=1),
        AttemptCounted(attempts=otp.MAX_ATTEMPTS),
        AttemptCounted(attempts=otp.MAX_ATTEMPTS + 1),
    ],
    CodeChecked: [CodeChecked(ok=True), CodeChecked(ok=False)],
    ChallengeTaken: [ChallengeTaken(ok=True), ChallengeTaken(ok=False)],
    SessionRequested: variants(
        SessionRequested,
        {"cookie": STORED, "claims": cookie_claims(), "required_relations": (("viewer", "doc:1"),)},
        required_relations=[()],
        cookie=[None],
        claims=[None, {}, cookie_claims(exp=NOW - 1)],
        roles=[("user",), ("admin",)],
        scope=[("openid",)],
    ),
    RefreshRequested: variants(
        RefreshRequested,
        {"refresh_token": STORED, "claims": refresh_claims()},
        claims=[None, refresh_claims(aud="someone-else"), refresh_claims(roles="user")],
    ),
    LogoutRequested: [LogoutRequested(session=None), LogoutRequested(session=_REF)],
    RevokeRequested: variants(
        RevokeRequested, {"refresh_token": STORED, "claims": refresh_claims()}, claims=[None, {}]
    ),
    SocialLoginRequested: variants(
        SocialLoginRequested,
        {
            "provider": Provider.GITHUB,
            "profile": SocialProfile(subject="gh-1", email=EMAIL, email_verified=True),
        },
        profile=[SocialProfile(subject="gh-1", email=EMAIL), SocialProfile(subject="gh-1")],
        roles=[("editor",), ("admin",)],
        scope=[("openid", "offline_access")],
        state=["authz-state"],
    ),
}

ALL_EVENT_TYPES: tuple[type[Event], ...] = tuple(SAMPLES)
#: how many samples at the head of a list count as "usual" (default 1)
USUAL: dict[type[Event], int] = {
    VerificationRequestLoaded: 2,
    UserLoaded: 2,
    #: by link, then by texted code
    ResetPasswordRequested: 2,
}
