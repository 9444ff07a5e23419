"""Password hashes written by other systems (tests/moving/hash_vectors.json: made by Django,
passlib, bcrypt in Go's form, and Firebase's published vector): each verifies with its
password only, and what bastion cannot or will not verify is refused with a reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bastion.service.hash_formats import UnusableHash, firebase_scrypt_hash, parse_hash
from bastion.service.passwords import PasswordHasher

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parents[1] / "moving" / "hash_vectors.json").read_text()
)
FIREBASE = VECTORS["firebase"]


def firebase_stored() -> str:
    return firebase_scrypt_hash(
        password_hash=FIREBASE["hash"], salt=FIREBASE["salt"], signer_key=FIREBASE["signer_key"],
        salt_separator=FIREBASE["salt_separator"], rounds=FIREBASE["rounds"],
        mem_cost=FIREBASE["mem_cost"],
    )  # fmt: skip


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: f"{v['source']}-{v['format']}")
def test_each_format_verifies_its_password_and_nothing_else(vector: dict[str, str]) -> None:
    parsed = parse_hash(vector["hash"])
    assert parsed.format == vector["format"]
    assert parsed.verify(vector["password"])
    assert not parsed.verify(vector["password"] + "!")
    assert not parsed.verify("")


def test_firebase_scrypt_verifies_the_published_vector() -> None:
    parsed = parse_hash(firebase_stored())
    assert parsed.format == "firebase-scrypt"
    assert parsed.verify(FIREBASE["password"])
    assert not parsed.verify("user1password2")


def test_the_hasher_verifies_foreign_hashes_and_asks_for_argon2id() -> None:
    async def main() -> None:
        hasher = PasswordHasher(concurrency=1)
        for vector in VECTORS["vectors"][:2]:
            assert await hasher.verify(vector["hash"], vector["password"]) == (True, True)
            assert await hasher.verify(vector["hash"], "wrong") == (False, False)
        own = await hasher.hash("Own-pass-1")
        assert await hasher.verify(own, "Own-pass-1") == (True, False)
        assert await hasher.verify("not a hash at all", "x") == (False, False)

    trio.run(main)


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        ("md5$abc$def", "not a known hash format"),
        ("$2a$10$short", "not a known hash format"),
        ("$argon2id$v=19$m=65536$broken", "malformed argon2"),
        ("$scrypt$ln=30,r=8,p=1$c2FsdA$aGFzaA", "beyond bastion's limit"),
        ("$scrypt$ln=14,r=8,p=99$c2FsdA$aGFzaA", "beyond bastion's limit"),
        ("scrypt$1000$salt$8$1$aGFzaA==", "parameters are invalid"),
        ("$pbkdf2-sha256$99999999$c2FsdA$aGFzaA", "out of bastion's range"),
        ("pbkdf2_sha256$0$salt$aGFzaA==", "out of bastion's range"),
        ("$pbkdf2-sha256$1000$c2FsdA$%%%", "not a known hash format"),
        ("$pbkdf2-sha256$1000$c2Fsd$aGFzaA", "not base64"),
        ("x" * 300, "longer than 256"),
    ],
)
def test_unusable_hashes_are_refused_with_the_reason(stored: str, reason: str) -> None:
    with pytest.raises(UnusableHash, match=reason) as refused:
        parse_hash(stored)
    assert stored not in str(refused.value)  # never quoted


def test_firebase_parameters_are_checked_when_the_hash_is_built() -> None:
    with pytest.raises(UnusableHash, match="mem_cost is out of range"):
        firebase_scrypt_hash(
            password_hash=FIREBASE["hash"], salt=FIREBASE["salt"],
            signer_key=FIREBASE["signer_key"], salt_separator=FIREBASE["salt_separator"],
            rounds=8, mem_cost=40,
        )  # fmt: skip
    with pytest.raises(UnusableHash, match="signer key is not base64"):
        firebase_scrypt_hash(
            password_hash=FIREBASE["hash"], salt=FIREBASE["salt"], signer_key="***",
            salt_separator=FIREBASE["salt_separator"], rounds=8, mem_cost=14,
        )  # fmt: skip
