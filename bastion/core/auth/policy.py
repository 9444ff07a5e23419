"""The configuration a flow decides with, and the ports it reads time and ids from.

Machines never see the global settings object: the service layer builds one
:class:`AuthPolicy` from the command-line flags and hands it, with the runtime's clock and
id source, to every machine as a :class:`FlowEnv`.
"""

from __future__ import annotations

import dataclasses

from bastion.core.ports import Clock, IdSource

__all__ = ["AuthPolicy", "FlowEnv"]

#: Access and ID tokens live 30 minutes (hard-wired in the reference, no flag).
ACCESS_TOKEN_TTL = 30 * 60
#: Verification links (signup, magic link, password reset) live 30 minutes.
VERIFICATION_TTL = 30 * 60


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class AuthPolicy:
    #: ``--url``: issuer of every token and base of every link we email.
    url: str
    #: ``--client-id``: the ``aud`` of every token.
    client_id: str
    roles: tuple[str, ...] = ("user",)
    default_roles: tuple[str, ...] = ("user",)
    protected_roles: tuple[str, ...] = ()
    enable_signup: bool = True
    enable_basic_authentication: bool = True
    enable_mobile_basic_authentication: bool = True
    enable_email_verification: bool = False
    enable_magic_link_login: bool = False
    enable_strong_password: bool = True
    #: ``--enforce-mfa``: new and reset accounts get ``is_multi_factor_auth_enabled``.
    enforce_mfa: bool = True
    #: SMTP host, port and sender are all configured.
    email_enabled: bool = False
    #: every SMS provider flag is configured.
    sms_enabled: bool = False
    #: ``--enable-phone-verification``: a phone number is proved by an SMS code.
    enable_phone_verification: bool = False
    #: ``--reset-password-url``; empty means ``<url>/app/reset-password``.
    reset_password_url: str = ""
    #: ``--jwt-role-claim``: where the ID token carries the granted roles.
    jwt_role_claim: str = "role"
    #: ``--refresh-token-expires-in`` in seconds.
    refresh_token_ttl: int = 2_592_000
    access_token_ttl: int = ACCESS_TOKEN_TTL
    verification_ttl: int = VERIFICATION_TTL
    organization_name: str = "Authorizer"
    organization_logo: str = "https://authorizer.dev/images/logo.png"

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be http(s): {self.url!r}")
        if not self.client_id:
            raise ValueError("client_id is required")
        if self.access_token_ttl <= 0 or self.refresh_token_ttl <= 0:
            raise ValueError("token lifetimes must be positive")

    @property
    def issuer(self) -> str:
        return self.url.rstrip("/")

    @property
    def verification_possible(self) -> bool:
        """Email verification is asked for AND mail can actually be sent."""
        return self.enable_email_verification and self.email_enabled

    @property
    def phone_verification_possible(self) -> bool:
        """Phone verification is asked for AND text messages can actually be sent."""
        return self.enable_phone_verification and self.sms_enabled


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FlowEnv:
    """Everything a machine reads from outside itself."""

    policy: AuthPolicy
    clock: Clock
    ids: IdSource

    def now(self) -> int:
        return int(self.clock.now())
