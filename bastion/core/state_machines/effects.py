"""Effects: what a flow asks its driver to do (shared by every flow).

An effect with ``replies`` waits for one of those events; the rest are fire-and-forget and
run in the order given (so "commit SQL, then drop sessions" is simply two effects in that
order). ``SendEmail`` and ``EmitWebhook`` go to the transactional outbox.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any, ClassVar

from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.passkeys import PasskeyOptions
from bastion.core.auth.responses import (
    AuthResponse,
    ForgotPasswordResponse,
    IssuedTokens,
    MessageResponse,
    TokenResponse,
)
from bastion.core.auth.user import User
from bastion.core.state_machines._machine import Effect, Event, Fail
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

__all__ = [
    "AuditAction",
    "AuditRecord",
    "CheckRequiredRelations",
    "ClearSessionCookie",
    "CreateUser",
    "CreateVerificationRequest",
    "DeleteSession",
    "DeleteUserSessions",
    "DeleteVerificationRequest",
    "EmitWebhook",
    "Fail",
    "HashPassword",
    "IssueTokens",
    "LoadStoredToken",
    "LoadUser",
    "LoadVerificationRequest",
    "PersistSession",
    "RehashPassword",
    "Respond",
    "Result",
    "SendEmail",
    "SetSessionCookie",
    "UpdateUser",
    "VerifyPasswordHash",
    "WebhookEvent",
]

Result = AuthResponse | MessageResponse | ForgotPasswordResponse | TokenResponse | PasskeyOptions


class WebhookEvent(enum.StrEnum):
    LOGIN = "user.login"
    CREATED = "user.created"
    SIGNUP = "user.signup"
    # passkeys (issue 22)
    PASSKEY_REGISTERED = "user.passkey_registered"
    PASSKEY_DELETED = "user.passkey_deleted"
    # MFA enrolment (bastion/core/state_machines/mfa_setup.py)
    MFA_ENROLLED = "user.mfa_enrolled"
    MFA_SETUP_SKIPPED = "user.mfa_setup_skipped"
    MFA_LOCKED = "user.mfa_locked"


class AuditAction(enum.StrEnum):
    LOGIN_SUCCESS = "user.login_success"
    LOGIN_FAILED = "user.login_failed"
    SIGNUP = "user.signup"
    LOGOUT = "user.logout"
    PASSWORD_RESET = "user.password_reset"
    FORGOT_PASSWORD_REQUESTED = "user.forgot_password_requested"
    MAGIC_LINK_REQUESTED = "user.magic_link_requested"
    EMAIL_VERIFIED = "user.email_verified"
    VERIFY_EMAIL_RESENT = "user.verify_email_resent"
    TOKEN_REFRESHED = "token.refreshed"
    TOKEN_REVOKED = "token.revoked"
    SESSION_CREATED = "session.created"
    # multi-factor authentication (issue 4)
    PHONE_VERIFIED = "user.phone_verified"
    OTP_RESENT = "user.otp_resent"
    MFA_CHALLENGE_ISSUED = "user.mfa_challenge_issued"
    MFA_PASSED = "user.mfa_passed"
    MFA_FAILED = "user.mfa_failed"
    MFA_GUESSES_EXHAUSTED = "user.mfa_guesses_exhausted"
    # MFA enrolment (bastion/core/state_machines/mfa_setup.py)
    MFA_ENROLLED = "user.mfa_enrolled"
    MFA_SETUP_SKIPPED = "user.mfa_setup_skipped"
    MFA_LOCKED = "user.mfa_locked"
    # social login (issue 10)
    OAUTH_CALLBACK_SUCCESS = "oauth.callback_success"
    # passkeys (issue 22)
    PASSKEY_REGISTERED = "user.passkey_registered"
    PASSKEY_RENAMED = "user.passkey_renamed"
    PASSKEY_DELETED = "user.passkey_deleted"
    PASSKEY_FAILED = "user.passkey_failed"
    # a user's sessions (issue 22): one signed out by its user
    SESSION_REVOKED = "user.session_revoked"


# -- effects that wait for a reply -----------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadUser(Effect):
    """Find one user by exactly one key. With ``session_started``, only while a session
    begun then still stands: ``None`` once the user's sessions were ended after it (a
    password reset, a deactivation, an admin's revoke or role change)."""

    replies: ClassVar[tuple[type[Event], ...]] = (UserLoaded,)
    email: str | None = None
    phone_number: str | None = None
    user_id: str | None = None
    session_started: int | None = None

    def __post_init__(self) -> None:
        if sum(k is not None for k in (self.email, self.phone_number, self.user_id)) != 1:
            raise ValueError("LoadUser takes exactly one of email, phone_number, user_id")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class VerifyPasswordHash(Effect):
    """Compare a password with a stored hash, in a worker thread. With no hash (unknown
    user, passwordless account) compare against a dummy hash and answer ``ok=False``, so
    that every outcome costs the same time."""

    replies: ClassVar[tuple[type[Event], ...]] = (PasswordVerified,)
    password: str = dataclasses.field(repr=False)
    password_hash: str | None = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class HashPassword(Effect):
    replies: ClassVar[tuple[type[Event], ...]] = (PasswordHashed,)
    password: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CreateUser(Effect):
    """Insert ``user`` unless its email or phone number is taken, holding the per-identity
    locks named by ``lock_keys`` around the check and the insert."""

    replies: ClassVar[tuple[type[Event], ...]] = (UserCreated, UserAlreadyExists)
    user: User
    lock_keys: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.lock_keys:
            raise ValueError("CreateUser needs at least one identity lock")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class IssueTokens(Effect):
    """Mint (sign) the session blob, access, ID and, if asked, refresh token with the
    claims of :mod:`core.auth.claims`. ``state`` is the OAuth authorize state to bind, if
    any; ``oidc_nonce`` the authorize request's nonce."""

    replies: ClassVar[tuple[type[Event], ...]] = (TokensIssued,)
    user: User
    roles: tuple[str, ...]
    scope: tuple[str, ...]
    login_method: str
    nonce: str
    include_refresh_token: bool
    state: str | None = None
    oidc_nonce: str | None = None
    #: an authorization code issued with these tokens (ID token ``c_hash``)
    code: str | None = dataclasses.field(default=None, repr=False)
    #: when the user authenticated, if earlier than now (ID token ``auth_time``)
    auth_time: int | None = None


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CreateVerificationRequest(Effect):
    """Store a verification request (replacing one for the same email and identifier) and
    sign its token with ``core.auth.claims.verification_token_claims``."""

    replies: ClassVar[tuple[type[Event], ...]] = (VerificationRequestCreated,)
    email: str
    identifier: EmailEvent
    nonce: str
    redirect_uri: str
    issued_at: int
    expires_at: int

    @property
    def continues_in(self) -> str:
        """The flow the mailed link starts when followed (its handoff): ``password_reset``
        with ``ResetPasswordRequested(token=...)`` for a reset link, else ``verification``
        with ``VerifyEmailRequested(token=...)`` (signup, magic link, email change)."""
        if self.identifier is EmailEvent.FORGOT_PASSWORD:
            return "password_reset"
        return "verification"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadVerificationRequest(Effect):
    """By ``token`` (and then verify its signature), or by ``email`` + ``identifier``."""

    replies: ClassVar[tuple[type[Event], ...]] = (VerificationRequestLoaded,)
    token: str | None = dataclasses.field(default=None, repr=False)
    email: str | None = None
    identifier: EmailEvent | None = None

    def __post_init__(self) -> None:
        by_token = self.token is not None
        by_email = self.email is not None and self.identifier is not None
        if by_token == by_email:
            raise ValueError("LoadVerificationRequest takes a token, or an email + identifier")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoadStoredToken(Effect):
    """Read a session-store entry ``<login_method>:<user_id>`` / ``<kind>_<nonce>``."""

    replies: ClassVar[tuple[type[Event], ...]] = (StoredTokenLoaded,)
    user_id: str
    login_method: str
    nonce: str
    kind: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CheckRequiredRelations(Effect):
    """Every ``(relation, object)`` must hold for ``user:<user_id>`` (FGA gate)."""

    replies: ClassVar[tuple[type[Event], ...]] = (RelationsChecked,)
    user_id: str
    relations: tuple[tuple[str, str], ...]


# -- fire-and-forget effects ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RehashPassword(Effect):
    """Replace an outdated hash with one of the current scheme."""

    user_id: str
    password: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UpdateUser(Effect):
    """Write the user's stored fields (SQL, committed before the effects after it)."""

    user: User


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PersistSession(Effect):
    """Store session, access and (if any) refresh token under
    ``<login_method>:<user_id>`` / ``<kind>_<nonce>``, each with its own lifetime."""

    user_id: str
    login_method: str
    tokens: IssuedTokens
    #: the session was won by a second factor just now (``update_profile`` asks): kept
    #: with the session, before the flow's commit
    fresh_factor: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSession(Effect):
    """Drop one session triple (session, access, refresh) by its nonce."""

    user_id: str
    login_method: str
    nonce: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DeleteUserSessions(Effect):
    """End every session of a user except ``keep_nonce`` (after the SQL change that
    motivated it, which also moves the user's "sessions valid after" marker)."""

    user_id: str
    keep_nonce: str | None = None
    #: Also drop every emailed link still pending for the account (magic links,
    #: verification and reset tokens): after a password reset none may sign in.
    end_links: bool = False
    #: Also delete the user's passkeys and authenticator, in the marker's transaction:
    #: an address the account held unverified was just proved, and whoever held the
    #: account before may have left them (issue 36; ``core.auth.mfa.without_devices``).
    end_credentials: bool = False


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DeleteVerificationRequest(Effect):
    request_id: str


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SetSessionCookie(Effect):
    """Set ``cookie_session`` and ``cookie_session_domain`` to ``value``."""

    value: str = dataclasses.field(repr=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClearSessionCookie(Effect):
    """Expire both application session cookies."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SendEmail(Effect):
    """Queue an email in the outbox: the stored template for ``event`` if any, else
    ``core.auth.emails.render_default_email``."""

    event: EmailEvent
    to: str
    user: User
    verification_url: str | None = None
    otp: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.verification_url is None) == (self.otp is None):
            raise ValueError("an email carries either a verification_url or an otp")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EmitWebhook(Effect):
    """Queue a webhook delivery; ``auth_recipe`` only for login and signup events."""

    event: WebhookEvent
    user: User
    auth_recipe: str = ""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuditRecord(Effect):
    """One audit-log row; the runtime adds ip, user agent and protocol."""

    action: AuditAction
    actor_id: str
    actor_email: str | None = None
    resource_type: str = "user"
    resource_id: str = ""
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict, hash=False)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Respond(Effect):
    """The flow succeeded: answer the caller with ``result``."""

    result: Result
