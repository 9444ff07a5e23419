"""TOTP secrets sealed at rest: AES-256-GCM bound to the owner's user id and the key."""

from __future__ import annotations

import pytest

from bastion.service.secretbox import SecretBox, SecretBoxError
from tests.core.auth.test_totp import SECRET, Seeded


def test_secretbox_round_trip_binds_owner_and_key() -> None:
    box = SecretBox("jwt-secret", Seeded())
    sealed = box.seal(SECRET, owner="user-1")
    assert sealed.startswith("v1.")
    assert SECRET not in sealed
    assert box.open(sealed, owner="user-1") == SECRET
    assert box.seal(SECRET, owner="user-1") != sealed, "a fresh nonce each time"
    with pytest.raises(SecretBoxError, match="owner"):
        box.open(sealed, owner="user-2")
    with pytest.raises(SecretBoxError, match="key"):
        SecretBox("another-secret", Seeded()).open(sealed, owner="user-1")
    tampered = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    with pytest.raises(SecretBoxError):
        box.open(tampered, owner="user-1")
    for damaged in ("v2.abc", "v1.", "v1.!!!!", "v1.AAAA"):
        with pytest.raises(SecretBoxError):
            box.open(damaged, owner="user-1")
