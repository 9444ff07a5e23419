"""The scenario catalogue: importing this package registers every scenario, in order."""

from __future__ import annotations

from bastion.conformance.catalogue import (
    admin_data,
    admin_session,
    admin_users,
    auth,
    fga,
    http_only,
    mail,
    mfa,
    mfa_setup,
    oauth,
    pages,
    passkeys,
    public,
    sessions,
    sms,
)
from bastion.conformance.scenario import CATALOGUE

__all__ = [
    "CATALOGUE",
    "admin_data",
    "admin_session",
    "admin_users",
    "auth",
    "fga",
    "http_only",
    "mail",
    "mfa",
    "mfa_setup",
    "oauth",
    "pages",
    "passkeys",
    "public",
    "sessions",
    "sms",
]
