"""The relying party's checks through the ``webauthn`` library: right answers verify, and
every mangled answer (any field of the JSON replaced) is a verdict, never an exception."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bastion.conformance.authenticator import SoftAuthenticator
from bastion.core.auth.passkeys import Ceremony, CeremonyKind, PasskeyOptions
from bastion.core.auth.user import User
from bastion.core.settings import Settings
from bastion.core.state_machines.passkey_effects import VerifyAssertion, VerifyAttestation
from bastion.service.passkeys.relying_party import RelyingParty

SETTINGS = Settings(
    url="https://auth.example.com",
    allowed_origins=("https://app.example.com", "https://*.example.com"),
    organization_name="Example",
)
RP = RelyingParty(SETTINGS)
USER = User(id="user-1", email="ann@example.com", created_at=0, updated_at=0)


def registration() -> tuple[SoftAuthenticator, Ceremony, str]:
    ceremony = Ceremony(challenge=RP.new_challenge(), kind=CeremonyKind.REGISTER, user_id="user-1")
    options = RP.render(PasskeyOptions(ceremony=ceremony, user=USER))
    device = SoftAuthenticator(origin="https://app.example.com", rp_id="auth.example.com")
    return device, ceremony, device.create(options)


def test_the_rp_comes_from_the_url_and_exact_origins() -> None:
    assert (RP.id, RP.name) == ("auth.example.com", "Example")
    assert RP.origins == ["https://auth.example.com", "https://app.example.com"]
    other = RelyingParty(dataclasses.replace(SETTINGS, webauthn_rp_id="example.com"))
    assert other.id == "example.com"


def test_registration_then_assertion_verify() -> None:
    device, ceremony, response = registration()
    made = RP.verify_attestation(
        VerifyAttestation(ceremony=ceremony, response=response), row_id="r", now=5
    )
    assert made.credential is not None
    assert made.user_verified
    assert made.credential.credential_id == json.loads(response)["id"]
    sign_in = Ceremony(challenge=RP.new_challenge(), kind=CeremonyKind.PASSWORDLESS)
    options = RP.render(PasskeyOptions(ceremony=sign_in))
    answer = RP.verify_assertion(
        VerifyAssertion(ceremony=sign_in, credential=made.credential, response=device.get(options))
    )
    assert answer.ok
    assert answer.sign_count == 1
    assert answer.user_verified
    wrong = RP.verify_assertion(
        VerifyAssertion(
            ceremony=sign_in,
            credential=made.credential,
            response=device.get(options, origin="https://evil.example.com"),
        )
    )
    assert not wrong.ok
    assert "origin" in wrong.reason.lower()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def _mangle(value: dict[str, Any], path: list[str], replacement: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(value))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = replacement
    return copy


REGISTRATION_PATHS = [
    ["id"],
    ["rawId"],
    ["type"],
    ["response", "clientDataJSON"],
    ["response", "attestationObject"],
    ["response", "transports"],
    ["response"],
]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(REGISTRATION_PATHS), JSON_VALUES)
def test_mangled_registrations_are_verdicts(path: list[str], replacement: Any) -> None:
    _device, ceremony, response = registration()
    mangled = json.dumps(_mangle(json.loads(response), path, replacement))
    made = RP.verify_attestation(
        VerifyAttestation(ceremony=ceremony, response=mangled), row_id="r", now=5
    )
    assert made.credential is None or path == ["response", "transports"]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(
        [
            ["id"],
            ["rawId"],
            ["response", "clientDataJSON"],
            ["response", "authenticatorData"],
            ["response", "signature"],
            ["response", "userHandle"],
            ["response"],
        ]
    ),
    JSON_VALUES,
)
def test_mangled_assertions_are_verdicts(path: list[str], replacement: Any) -> None:
    device, ceremony, response = registration()
    made = RP.verify_attestation(
        VerifyAttestation(ceremony=ceremony, response=response), row_id="r", now=5
    )
    assert made.credential is not None
    sign_in = Ceremony(challenge=RP.new_challenge(), kind=CeremonyKind.PASSWORDLESS)
    answer = json.loads(device.get(RP.render(PasskeyOptions(ceremony=sign_in))))
    mangled = json.dumps(_mangle(answer, path, replacement))
    verdict = RP.verify_assertion(
        VerifyAssertion(ceremony=sign_in, credential=made.credential, response=mangled)
    )
    assert not verdict.ok or path in (["id"], ["response", "userHandle"])
