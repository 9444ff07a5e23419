"""The relying party: bastion's WebAuthn identity and the ``webauthn`` library's checks.

The rp id defaults to the host of ``--url``; the origins a response may come from are
``--url`` and every exact ``--allowed-origins`` entry (a wildcard or ``*`` entry names no
origin a browser could report). Verification answers events for
:mod:`core.state_machines.passkey`; the counter, backup flags and user verification are
judged there, so the library is asked for signature, challenge, origin and rp id only.
"""

from __future__ import annotations

import json
import secrets
from urllib.parse import urlsplit

from webauthn import (
    base64url_to_bytes,
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import bytes_to_base64url, parse_registration_credential_json
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    CredentialDeviceType,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from bastion.core.auth.passkeys import CeremonyKind, PasskeyCredential, PasskeyOptions
from bastion.core.settings import Settings
from bastion.core.state_machines.passkey_effects import (
    AssertionVerified,
    AttestationVerified,
    VerifyAssertion,
    VerifyAttestation,
)

__all__ = ["RelyingParty"]

#: What the library (and its CBOR and key parsing) raises on a malformed response: the
#: response is untrusted input, and any of these means it proves nothing.
MALFORMED = (
    WebAuthnException,
    ValueError,
    KeyError,
    TypeError,
    AttributeError,
    IndexError,
    OverflowError,
)

#: Milliseconds the browser gives the user (the ceremony itself lives CEREMONY_TTL s).
TIMEOUT_MS = 120_000


def _transports(names: tuple[str, ...]) -> list[AuthenticatorTransport] | None:
    known = {t.value for t in AuthenticatorTransport}
    found = [AuthenticatorTransport(n) for n in names if n in known]
    return found or None


def _descriptor(credential: PasskeyCredential) -> PublicKeyCredentialDescriptor:
    return PublicKeyCredentialDescriptor(
        id=base64url_to_bytes(credential.credential_id),
        transports=_transports(credential.transports),
    )


class RelyingParty:
    def __init__(self, settings: Settings) -> None:
        self.id = settings.webauthn_rp_id or (urlsplit(settings.url).hostname or "localhost")
        self.name = settings.webauthn_rp_name or settings.organization_name or self.id
        exact = [o for o in settings.allowed_origins if o != "*" and "*" not in o]
        self.origins = [settings.url.rstrip("/"), *(o.rstrip("/") for o in exact)]

    @staticmethod
    def new_challenge() -> str:
        return bytes_to_base64url(secrets.token_bytes(32))

    def render(self, options: PasskeyOptions) -> str:
        """The options JSON for ``navigator.credentials.create()`` or ``get()``."""
        ceremony = options.ceremony
        challenge = base64url_to_bytes(ceremony.challenge)
        wanted = (
            UserVerificationRequirement.REQUIRED
            if ceremony.user_verification
            else UserVerificationRequirement.PREFERRED
        )
        if ceremony.kind is CeremonyKind.REGISTER:
            user = options.user
            if user is None:
                raise ValueError("registration options need their user")
            made = generate_registration_options(
                rp_id=self.id,
                rp_name=self.name,
                user_id=user.id.encode(),
                user_name=user.email or user.phone_number or user.id,
                user_display_name=" ".join(p for p in (user.given_name, user.family_name) if p),
                challenge=challenge,
                timeout=TIMEOUT_MS,
                authenticator_selection=AuthenticatorSelectionCriteria(
                    resident_key=ResidentKeyRequirement.REQUIRED,
                    user_verification=wanted,
                ),
                exclude_credentials=[_descriptor(c) for c in options.credentials],
            )
            return options_to_json(made)
        asked = generate_authentication_options(
            rp_id=self.id,
            challenge=challenge,
            timeout=TIMEOUT_MS,
            allow_credentials=[_descriptor(c) for c in options.credentials],
            user_verification=wanted,
        )
        return options_to_json(asked)

    def verify_attestation(
        self, effect: VerifyAttestation, *, row_id: str, now: int
    ) -> AttestationVerified:
        try:
            parsed = parse_registration_credential_json(effect.response)
            verified = verify_registration_response(
                credential=parsed,
                expected_challenge=base64url_to_bytes(effect.ceremony.challenge),
                expected_rp_id=self.id,
                expected_origin=self.origins,
                require_user_verification=False,
            )
        except MALFORMED as error:
            return AttestationVerified(credential=None, reason=str(error)[:200])
        transports = tuple(t.value for t in parsed.response.transports or ())
        credential = PasskeyCredential(
            id=row_id,
            user_id=effect.ceremony.user_id,
            credential_id=bytes_to_base64url(verified.credential_id),
            public_key=verified.credential_public_key,
            sign_count=verified.sign_count,
            transports=transports,
            name=effect.name or "Passkey",
            backup_eligible=verified.credential_device_type is CredentialDeviceType.MULTI_DEVICE,
            backed_up=verified.credential_backed_up,
            created_at=now,
            updated_at=now,
        )
        return AttestationVerified(credential=credential, user_verified=verified.user_verified)

    def verify_assertion(self, effect: VerifyAssertion) -> AssertionVerified:
        try:
            verified = verify_authentication_response(
                credential=json.loads(effect.response),
                expected_challenge=base64url_to_bytes(effect.ceremony.challenge),
                expected_rp_id=self.id,
                expected_origin=self.origins,
                credential_public_key=effect.credential.public_key,
                # The counter is the flow's to judge (core.auth.passkeys.counter_moved_back).
                credential_current_sign_count=0,
                require_user_verification=False,
            )
        except MALFORMED as error:
            return AssertionVerified(ok=False, reason=str(error)[:200])
        return AssertionVerified(
            ok=True,
            sign_count=verified.new_sign_count,
            user_verified=verified.user_verified,
            backup_eligible=verified.credential_device_type is CredentialDeviceType.MULTI_DEVICE,
            backed_up=verified.credential_backed_up,
        )
