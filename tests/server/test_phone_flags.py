"""The real ``bastion`` command refuses every MFA / phone flag combination that could not
work, before anything listens, with one line naming the flags (exit status 2)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.server.harness import BASTION, base_flags

PROVIDER = {
    "--sms-account-sid": "AC123",
    "--sms-api-key": "SK123",
    "--sms-api-secret": "secret",
    "--sms-sender": "+15550001111",
}
NEEDS_PROVIDER = (
    "needs the SMS provider: give --sms-account-sid, --sms-api-key, --sms-api-secret, "
    "--sms-sender (missing: {})"
)


def provider(*leave_out: str) -> list[str]:
    return [f"{flag}={value}" for flag, value in PROVIDER.items() if flag not in leave_out]


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        pytest.param(
            ["--enable-mfa", "--enable-sms-otp"],
            "--enable-sms-otp "
            + NEEDS_PROVIDER.format(
                "--sms-account-sid, --sms-api-key, --sms-api-secret, --sms-sender"
            ),
            id="sms-otp-without-provider",
        ),
        pytest.param(
            ["--enable-mfa", "--enable-sms-otp", *provider("--sms-api-secret")],
            "--enable-sms-otp " + NEEDS_PROVIDER.format("--sms-api-secret"),
            id="sms-otp-without-secret",
        ),
        pytest.param(
            ["--enable-phone-verification", *provider("--sms-sender", "--sms-account-sid")],
            "--enable-phone-verification "
            + NEEDS_PROVIDER.format("--sms-account-sid, --sms-sender"),
            id="phone-verification-without-sender",
        ),
        pytest.param(
            ["--enable-phone-verification", "--sms-api-url=http://127.0.0.1:9"],
            "--enable-phone-verification "
            + NEEDS_PROVIDER.format(
                "--sms-account-sid, --sms-api-key, --sms-api-secret, --sms-sender"
            ),
            id="phone-verification-with-only-the-url",
        ),
        pytest.param(
            ["--enable-mfa", *provider()],
            "--enable-mfa needs a method: give --enable-totp-login, --enable-email-otp "
            "or --enable-sms-otp",
            id="mfa-without-a-method",
        ),
        pytest.param(
            ["--enable-mfa", "--enable-email-otp"],
            "--enable-email-otp needs mail: give --smtp-host (and --smtp-sender-email)",
            id="email-otp-without-smtp",
        ),
    ],
)
def test_refused_combinations(tmp_path: Path, extra: list[str], line: str) -> None:
    database = tmp_path / "refused.db"
    result = subprocess.run(
        [BASTION, *base_flags("sqlite", str(database)), *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"bastion: {line}\n"
    assert not database.exists()  # refused before anything was opened
