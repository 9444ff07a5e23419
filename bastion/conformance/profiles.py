"""Which deployments cover which rows: a few feature-flag profiles that, run one after
the other, leave no row of the catalogue skipped everywhere.

``--profile NAME`` prints a profile's flags (to add to the deployment's own: database,
secrets, URL) and the suite options that go with it. A row needs its profile's flags;
most rows run on any deployment (the ``default`` profile).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

#: Stands for the address the deployment reaches the suite's sinks at.
SINK = "SUITE_HOST"


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    doc: str
    #: Flags for the deployment (beyond its required ones).
    flags: tuple[str, ...]
    #: Options for the suite when it runs against such a deployment.
    suite: tuple[str, ...]
    #: Rows this profile is for (globs over scenario names).
    rows: tuple[str, ...]


_WEBHOOKS = "--webhook-allow-private-targets=true"
_MAIL = (
    f"--smtp-host={SINK}",
    "--smtp-port=2525",
    "--smtp-sender-email=bastion@conformance.example.com",
)
_SMS = (
    "--sms-account-sid=AC-conformance",
    "--sms-api-key=SK-conformance",
    "--sms-api-secret=conformance-secret",
    "--sms-sender=+15550001111",
    f"--sms-api-url=http://{SINK}:2526",
)

PROFILES: tuple[Profile, ...] = (
    Profile(
        "default",
        "every flag at its default (rate limits on), webhooks may reach the suite",
        (_WEBHOOKS,),
        ("--destructive",),
        ("*",),
    ),
    Profile(
        "mail",
        "emailed links: verification, magic links, resets, invitations",
        (*_MAIL, "--enable-email-verification=true", "--enable-magic-link-login=true"),
        ("--mail-sink", "0.0.0.0:2525"),
        ("mail.*",),
    ),
    Profile(
        "sms",
        "texted codes: phone verification, reset by phone, SMS as a second factor",
        (
            *_SMS,
            "--enable-phone-verification=true",
            "--enable-mfa=true",
            "--enable-sms-otp=true",
            "--enforce-mfa=false",
        ),
        ("--sms-sink", "0.0.0.0:2526"),
        ("sms.*",),
    ),
    Profile(
        "mfa-email",
        "emailed codes as a second factor",
        (*_MAIL, "--enable-mfa", "--enforce-mfa=false", "--enable-email-otp"),
        ("--mail-sink", "0.0.0.0:2525"),
        ("mfa.email_*",),
    ),
    Profile(
        "mfa-totp",
        "authenticator apps as a second factor",
        ("--enable-mfa", "--enforce-mfa=false", "--enable-totp-login"),
        (),
        ("mfa.totp_*",),
    ),
    Profile(
        "passkeys",
        "passkeys (WebAuthn): a software authenticator registers and signs in, alone and as "
        "the second factor a login is parked for",
        ("--enable-passkeys", "--enable-mfa", "--enforce-mfa=false", "--enable-totp-login"),
        (),
        ("passkeys.*",),
    ),
    Profile(
        "fga-off",
        "the authorization engine off: every engine operation is failed_precondition",
        ("--fga-store=none",),
        ("--destructive",),
        ("fga.not_enabled_*",),
    ),
)


def profile(name: str) -> Profile:
    for candidate in PROFILES:
        if candidate.name == name:
            return candidate
    raise KeyError(name)


def profile_for(row: str) -> Profile:
    """The most specific profile whose rows include ``row``."""
    for candidate in PROFILES[1:]:
        if any(fnmatch.fnmatch(row, pattern) for pattern in candidate.rows):
            return candidate
    return PROFILES[0]


def describe(chosen: Profile, rows: Sequence[str]) -> str:
    covered = [r for r in rows if profile_for(r) is chosen]
    lines = [
        f"profile {chosen.name}: {chosen.doc}",
        "deployment flags (besides database, secrets and --url; "
        f"{SINK} is where the deployment reaches this machine):",
        *(f"  {flag}" for flag in chosen.flags),
        "suite options: " + (" ".join(chosen.suite) or "(none)"),
        f"rows ({len(covered)}):",
        *(f"  {row}" for row in covered),
    ]
    return "\n".join(lines) + "\n"
