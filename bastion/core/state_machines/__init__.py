"""One explicit state machine per authentication flow: the public API of the flows.

Everything an embedder needs is importable from here: every machine, every event a driver
feeds, every effect a driver carries out (one by one, and together as ``AnyEffect``),
``MACHINES``, and the values effects and answers carry (``User``, ``IssuedTokens``,
``EmailEvent``, ``AuditAction``, ``MfaOutcome``, ``Result``). Each flow module still holds
its ``State`` enum (also ``Machine.STATES``); ``_machine`` explains the rules. Each machine
lists the effects it may emit in ``EMITS``; a flow that starts another ends with a
:class:`Handoff` (today :class:`StartChallenge`, which starts the MFA flow).
See ``docs/embedding.md``.
"""

from typing import Any

from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.responses import IssuedTokens
from bastion.core.auth.user import User
from bastion.core.state_machines._machine import (
    SECRET,
    Effect,
    Event,
    Fail,
    Handoff,
    LocalFlowError,
    Machine,
    to_dot,
)
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CheckRequiredRelations,
    ClearSessionCookie,
    CreateUser,
    CreateVerificationRequest,
    DeleteSession,
    DeleteUserSessions,
    DeleteVerificationRequest,
    EmitWebhook,
    HashPassword,
    IssueTokens,
    LoadStoredToken,
    LoadUser,
    LoadVerificationRequest,
    PersistSession,
    RehashPassword,
    Respond,
    Result,
    SendEmail,
    SetSessionCookie,
    UpdateUser,
    VerifyPasswordHash,
)
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
from bastion.core.state_machines.handoff import ChallengeRequested, StartChallenge
from bastion.core.state_machines.login import (
    DecideSecondFactor,
    LoginMachine,
    LoginRequested,
    SecondFactorNotRequired,
    SecondFactorRequired,
)
from bastion.core.state_machines.magic_link import MagicLinkMachine, MagicLinkRequested
from bastion.core.state_machines.mfa import MfaMachine, ResendOtpRequested, VerifyOtpRequested
from bastion.core.state_machines.mfa_effects import (
    AttemptCounted,
    AuthenticatorEnrolled,
    AuthenticatorLoaded,
    ChallengeLoaded,
    ChallengeTaken,
    CheckCode,
    ClearMfaCookie,
    CodeChecked,
    CodeGenerated,
    CountAttempt,
    DropChallenge,
    EnrolAuthenticator,
    FactorsLoaded,
    GenerateCode,
    LoadAuthenticator,
    LoadChallenge,
    LoadFactors,
    MfaOutcome,
    RecordMfaOutcome,
    RecordTotpStep,
    SendSms,
    SetMfaCookie,
    StoreChallenge,
    TakeChallenge,
    UseRecoveryCode,
)
from bastion.core.state_machines.mfa_setup import MfaSetupMachine, MfaSetupRequested
from bastion.core.state_machines.oauth_authorize import (
    AuthorizeRequested,
    CodeRedemptionRequested,
    LoginWithState,
    OAuthAuthorizeMachine,
)
from bastion.core.state_machines.oauth_authorize_effects import (
    CheckSession,
    CodeTaken,
    Deliver,
    RedirectToLogin,
    RememberCodeTokens,
    RevokeCodeTokens,
    SessionChecked,
    StoreCode,
    StorePending,
    TakeCode,
)
from bastion.core.state_machines.passkey import (
    PasskeyMachine,
    RegistrationVerifyRequested,
    SignInVerifyRequested,
)
from bastion.core.state_machines.passkey_effects import (
    AssertionVerified,
    AttestationVerified,
    CeremonyTaken,
    CredentialLoaded,
    CredentialsLoaded,
    CredentialStored,
    CredentialUseRecorded,
    LoadCredential,
    LoadCredentials,
    RecordCredentialUse,
    StoreCeremony,
    StoreCredential,
    TakeCeremony,
    VerifyAssertion,
    VerifyAttestation,
)
from bastion.core.state_machines.passkey_options import (
    PasskeyOptionsMachine,
    RegistrationOptionsRequested,
    SignInOptionsRequested,
)
from bastion.core.state_machines.password_reset import (
    ForgotPasswordRequested,
    PasswordResetMachine,
    ResetPasswordRequested,
)
from bastion.core.state_machines.session import (
    LogoutRequested,
    RefreshRequested,
    RevokeRequested,
    SessionMachine,
    SessionRequested,
)
from bastion.core.state_machines.signup import SignupMachine, SignupRequested
from bastion.core.state_machines.social_login import SocialLoginMachine, SocialLoginRequested
from bastion.core.state_machines.verification import (
    ResendVerifyEmailRequested,
    VerificationMachine,
    VerifyEmailRequested,
)

__all__ = [
    "MACHINES",
    "SECRET",
    "AnyEffect",
    "AssertionVerified",
    "AttemptCounted",
    "AttestationVerified",
    "AuditAction",
    "AuditRecord",
    "AuthenticatorEnrolled",
    "AuthenticatorLoaded",
    "AuthorizeRequested",
    "CeremonyTaken",
    "ChallengeLoaded",
    "ChallengeRequested",
    "ChallengeTaken",
    "CheckCode",
    "CheckRequiredRelations",
    "CheckSession",
    "ClearMfaCookie",
    "ClearSessionCookie",
    "CodeChecked",
    "CodeGenerated",
    "CodeRedemptionRequested",
    "CodeTaken",
    "CountAttempt",
    "CreateUser",
    "CreateVerificationRequest",
    "CredentialLoaded",
    "CredentialStored",
    "CredentialUseRecorded",
    "CredentialsLoaded",
    "DecideSecondFactor",
    "DeleteSession",
    "DeleteUserSessions",
    "DeleteVerificationRequest",
    "Deliver",
    "DropChallenge",
    "Effect",
    "EmailEvent",
    "EmitWebhook",
    "EnrolAuthenticator",
    "Event",
    "FactorsLoaded",
    "Fail",
    "ForgotPasswordRequested",
    "GenerateCode",
    "Handoff",
    "HashPassword",
    "IssueTokens",
    "IssuedTokens",
    "LoadAuthenticator",
    "LoadChallenge",
    "LoadCredential",
    "LoadCredentials",
    "LoadFactors",
    "LoadStoredToken",
    "LoadUser",
    "LoadVerificationRequest",
    "LocalFlowError",
    "LoginMachine",
    "LoginRequested",
    "LoginWithState",
    "LogoutRequested",
    "Machine",
    "MagicLinkMachine",
    "MagicLinkRequested",
    "MfaMachine",
    "MfaOutcome",
    "MfaSetupMachine",
    "MfaSetupRequested",
    "OAuthAuthorizeMachine",
    "PasskeyMachine",
    "PasskeyOptionsMachine",
    "PasswordHashed",
    "PasswordResetMachine",
    "PasswordVerified",
    "PersistSession",
    "RecordCredentialUse",
    "RecordMfaOutcome",
    "RecordTotpStep",
    "RedirectToLogin",
    "RefreshRequested",
    "RegistrationOptionsRequested",
    "RegistrationVerifyRequested",
    "RehashPassword",
    "RelationsChecked",
    "RememberCodeTokens",
    "ResendOtpRequested",
    "ResendVerifyEmailRequested",
    "ResetPasswordRequested",
    "Respond",
    "Result",
    "RevokeCodeTokens",
    "RevokeRequested",
    "SecondFactorNotRequired",
    "SecondFactorRequired",
    "SendEmail",
    "SendSms",
    "SessionChecked",
    "SessionMachine",
    "SessionRequested",
    "SetMfaCookie",
    "SetSessionCookie",
    "SignInOptionsRequested",
    "SignInVerifyRequested",
    "SignupMachine",
    "SignupRequested",
    "SocialLoginMachine",
    "SocialLoginRequested",
    "StartChallenge",
    "StoreCeremony",
    "StoreChallenge",
    "StoreCode",
    "StoreCredential",
    "StorePending",
    "StoredTokenLoaded",
    "TakeCeremony",
    "TakeChallenge",
    "TakeCode",
    "TokensIssued",
    "UpdateUser",
    "UseRecoveryCode",
    "User",
    "UserAlreadyExists",
    "UserCreated",
    "UserLoaded",
    "VerificationMachine",
    "VerificationRequestCreated",
    "VerificationRequestLoaded",
    "VerifyAssertion",
    "VerifyAttestation",
    "VerifyEmailRequested",
    "VerifyOtpRequested",
    "VerifyPasswordHash",
    "to_dot",
]

#: every concrete effect a machine may emit, as one type: ``match effect:`` over it, with
#: ``case _: assert_never(effect)`` last, is checked for exhaustiveness by mypy and pyright
#: (each machine's ``EMITS`` is the subset it may emit; ``reference.HANDLED`` what the
#: reference drivers carry out)
AnyEffect = (
    AuditRecord
    | CheckCode
    | CheckRequiredRelations
    | CheckSession
    | ClearMfaCookie
    | ClearSessionCookie
    | CountAttempt
    | CreateUser
    | CreateVerificationRequest
    | DecideSecondFactor
    | DeleteSession
    | DeleteUserSessions
    | DeleteVerificationRequest
    | Deliver
    | DropChallenge
    | EmitWebhook
    | EnrolAuthenticator
    | Fail
    | GenerateCode
    | HashPassword
    | IssueTokens
    | LoadAuthenticator
    | LoadChallenge
    | LoadCredential
    | LoadCredentials
    | LoadFactors
    | LoadStoredToken
    | LoadUser
    | LoadVerificationRequest
    | PersistSession
    | RecordCredentialUse
    | RecordMfaOutcome
    | RecordTotpStep
    | RedirectToLogin
    | RehashPassword
    | RememberCodeTokens
    | Respond
    | RevokeCodeTokens
    | SendEmail
    | SendSms
    | SetMfaCookie
    | SetSessionCookie
    | StartChallenge
    | StoreCeremony
    | StoreChallenge
    | StoreCode
    | StoreCredential
    | StorePending
    | TakeCeremony
    | TakeChallenge
    | TakeCode
    | UpdateUser
    | UseRecoveryCode
    | VerifyAssertion
    | VerifyAttestation
    | VerifyPasswordHash
)

#: every flow machine built from a ``FlowEnv`` alone, by its ``FLOW`` name (what
#: ``to_dict()["flow"]`` and ``Handoff.flow`` say); ``OAuthAuthorizeMachine`` also takes an
#: ``OAuthPolicy``, and the passkey machines need a WebAuthn relying party for their
#: ``VerifyAttestation``/``VerifyAssertion`` effects (the reference driver has none): they
#: are not listed
MACHINES: dict[str, type[Machine[Any]]] = {
    m.FLOW: m
    for m in (
        SignupMachine,
        LoginMachine,
        VerificationMachine,
        MagicLinkMachine,
        PasswordResetMachine,
        SessionMachine,
        SocialLoginMachine,
        MfaMachine,
        MfaSetupMachine,
    )
}
