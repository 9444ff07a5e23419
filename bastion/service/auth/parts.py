"""What every authentication flow works with: the settings, storage and the machinery
built from them (token signer, session and challenge stores, cookies, password hasher),
set up once per server. :class:`service.auth.service.AuthService` is built on it; the
flow driver and the self-service MFA steps take it as their host.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from bastion.core.auth import otp
from bastion.core.auth.claims import SESSION_TTL
from bastion.core.auth.mfa import Method, MfaPolicy
from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.auth.responses import IssuedTokens
from bastion.core.errors import FailedPrecondition
from bastion.core.origins import OriginPolicy
from bastion.core.ports import Clock, IdSource
from bastion.core.settings import Settings
from bastion.core.state_machines.effects import IssueTokens
from bastion.core.state_machines.mfa_effects import MfaOutcome
from bastion.service.auth.authenticators import AuthenticatorStore
from bastion.service.auth.cookies import SessionCookies
from bastion.service.auth.devices import AccountCookies
from bastion.service.auth.issuer import CustomClaims, TokenIssuer
from bastion.service.auth.sessions import Lifetimes, SessionStore
from bastion.service.context import CallerContext
from bastion.service.metrics import Metrics
from bastion.service.mfa_challenges import ChallengeStore
from bastion.service.passwords import PasswordHasher, hashes_at_once
from bastion.service.secretbox import SecretBox
from bastion.service.sms import sms_configured
from bastion.service.system import SystemClock, SystemIds, SystemRandom
from bastion.service.tokens import TokenSigner
from bastion.storage import Storage

__all__ = ["AuthParts", "RelationGate", "policy_from"]


class RelationGate(Protocol):
    async def require_relations(
        self, user: str, relations: Sequence[Mapping[str, Any]]
    ) -> None: ...


def policy_from(settings: Settings) -> AuthPolicy:
    return AuthPolicy(
        url=settings.url,
        client_id=settings.client_id,
        roles=settings.roles,
        default_roles=settings.default_roles,
        protected_roles=settings.protected_roles,
        enable_signup=settings.enable_signup,
        enable_basic_authentication=settings.enable_basic_authentication,
        enable_mobile_basic_authentication=settings.enable_mobile_basic_authentication,
        enable_email_verification=settings.enable_email_verification,
        enable_magic_link_login=settings.enable_magic_link_login,
        enable_strong_password=settings.enable_strong_password,
        enforce_mfa=settings.enforce_mfa,
        email_enabled=bool(settings.smtp_host),
        sms_enabled=sms_configured(settings),
        enable_phone_verification=settings.enable_phone_verification,
        reset_password_url=settings.reset_password_url,
        jwt_role_claim=settings.jwt_role_claim,
        refresh_token_ttl=settings.refresh_token_expires_in,
        organization_name=settings.organization_name,
        organization_logo=settings.organization_logo,
    )


def mfa_policy_from(settings: Settings) -> MfaPolicy:
    return MfaPolicy(
        enable_mfa=settings.enable_mfa,
        enforce_mfa=settings.enforce_mfa,
        enable_email_otp=settings.enable_email_otp,
        enable_sms_otp=settings.enable_sms_otp,
        enable_totp_login=settings.enable_totp_login,
        enable_phone_verification=settings.enable_phone_verification,
        email_enabled=bool(settings.smtp_host),
        sms_enabled=sms_configured(settings),
        enable_webauthn=settings.enable_passkeys,
    )


class AuthParts:
    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        origins: OriginPolicy,
        *,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        custom_claims: CustomClaims | None = None,
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.origins = origins
        self.clock: Clock = clock or SystemClock()
        self.ids: IdSource = ids or SystemIds()
        self.policy = policy_from(settings)
        self.env = FlowEnv(policy=self.policy, clock=self.clock, ids=self.ids)
        self.signer = TokenSigner(settings)
        self.cookies = SessionCookies(settings)
        self.devices = AccountCookies.devices(settings)
        self.signers = AccountCookies.signers(settings)
        self.lifetimes = Lifetimes(
            session=SESSION_TTL,
            access=self.policy.access_token_ttl,
            refresh=self.policy.refresh_token_ttl,
        )
        self.sessions = SessionStore(storage, self.lifetimes)
        self.hasher = PasswordHasher(concurrency=hashes_at_once(settings.workers))
        self.issuer = TokenIssuer(self.policy, self.signer, self.cookies, custom_claims)
        #: the authorization engine's ``required_relations`` gate, attached by the Runtime
        self.relation_gate: RelationGate | None = None
        self.mfa_policy = mfa_policy_from(settings)
        self.challenges = ChallengeStore(
            storage.memory,
            otp_key=otp.derive_key(settings.client_secret),
            randomness=SystemRandom(),
            clock=self.clock,
        )
        self.authenticators = AuthenticatorStore(
            storage.db,
            SecretBox(
                settings.client_secret,
                SystemRandom(),
                previous=tuple(filter(None, [settings.client_secret_previous])),
            ),
            randomness=SystemRandom(),
            clock=self.clock,
            ids=self.ids,
        )
        #: binds a login carrying an authorize ``state`` to that request (the OAuth
        #: provider's ``bind_state``), the login's session family and the time its tokens
        #: are minted at, attached by the Runtime
        self.state_binder: (
            Callable[[IssueTokens, CallerContext, str, int], Awaitable[IssueTokens]] | None
        ) = None
        #: the server's metrics (logins, tokens, MFA outcomes), attached by the Runtime
        self.metrics: Metrics | None = None

    async def mint(self, effect: IssueTokens, *, sid: str, now: int) -> IssuedTokens:
        """The tokens ``effect`` asks for, counted by kind."""
        tokens = await self.issuer.mint(effect, sid=sid, now=now)
        if self.metrics is not None:
            issued = self.metrics.tokens_issued
            issued.labels("access").inc()
            if tokens.id_token:
                issued.labels("id").inc()
            if tokens.refresh_token:
                issued.labels("refresh").inc()
        return tokens

    def record_login(self, identifier: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.logins.labels(identifier, outcome).inc()

    def record_mfa_outcome(self, method: Method, outcome: MfaOutcome) -> None:
        if self.metrics is not None:
            self.metrics.mfa_challenges.labels(method.value, outcome.value).inc()

    async def require_relations(self, user_id: str, wanted: Sequence[tuple[str, str]]) -> None:
        """``required_relations``: every (relation, object) must hold for the user."""
        if not wanted:
            return
        if self.relation_gate is None:
            raise FailedPrecondition("fga is not enabled on this server")
        await self.relation_gate.require_relations(
            f"user:{user_id}", [{"relation": r, "object": o} for r, o in wanted]
        )
