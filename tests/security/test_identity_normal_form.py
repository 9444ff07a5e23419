"""One normal form for addresses (issue #28): IDNA domain without the trailing dot, NFKC
and case-folded local part; control characters refused; the migration that brings existing
rows to that form and reports collisions instead of merging them."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from bastion.core.auth.user import (
    identity_lock_key,
    is_valid_email,
    is_valid_phone_number,
    normalise_email,
)
from bastion.storage.sql import migrate, open_database
from bastion.storage.sql.migrate import head_revision
from bastion.storage.sql.schema import users
from tests.dbfixtures import fresh_database_url
from tests.storage.helpers import config_for, upgrade_to


@pytest.mark.parametrize(
    "spelling",
    [
        "dup@x.io",
        "dup@\uff58.io",
        "dup@x.io.",
        " DUP@X.IO ",
        "\uff44\uff55\uff50@X.IO.",
    ],
)
def test_spellings_of_one_address_share_one_form(spelling: str) -> None:
    assert normalise_email(spelling) == "dup@x.io"
    assert identity_lock_key(email=spelling) == "email:dup@x.io"


def test_punycode_and_unicode_domains_share_one_form() -> None:
    assert normalise_email("a@XN--BCHER-KVA.de") == normalise_email("a@Bücher.de") == "a@bücher.de"


def test_local_part_is_case_folded() -> None:
    assert normalise_email("Straße@x.io") == "strasse@x.io"


@pytest.mark.parametrize(
    "email", ["a\x00b@x.io", "ab@x.io\x00", "a\x07@x.io", "a\u200b@x.io", "a@-x.io", "a@x..io"]
)
def test_control_characters_and_bad_domains_are_refused(email: str) -> None:
    assert not is_valid_email(email)
    assert not is_valid_email(normalise_email(email))


@pytest.mark.parametrize("phone", ["+1555123\x00456", "+15551234567\n", "+1555\x1b1234567"])
def test_control_characters_in_phone_numbers_are_refused(phone: str) -> None:
    assert not is_valid_phone_number(phone)


def _row(email: str) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "email": email,
        "signup_methods": "basic_auth",
        "roles": "user",
        "created_at": 1,
        "updated_at": 1,
    }


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_migration_normalises_rows_and_reports_collisions(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = fresh_database_url(kind, tmp_path, purpose="identity-normal-form")
    lone, first, second = (
        _row("Lone@\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25.org."),
        _row("dup@x.io"),
        _row("DUP@\uff58.io"),
    )
    async with open_database(config_for(kind, url)) as db:
        await db.run(lambda conn: upgrade_to(conn, "0006"), write=True)
        await db.run(lambda conn: conn.execute(sa.insert(users), [lone, first, second]), write=True)
        with caplog.at_level(logging.WARNING, logger="bastion.migrations"):
            report = await migrate(db)
        assert (report.from_revision, report.to_revision) == ("0006", head_revision())

        def emails(conn: sa.Connection) -> dict[str, str]:
            return {row[0]: row[1] for row in conn.execute(sa.select(users.c.id, users.c.email))}

        found = await db.run(emails)
    assert found[str(lone["id"])] == "lone@example.org"
    # A collision is reported by user id and left for the operator, not merged.
    assert found[str(first["id"])] == "dup@x.io"
    assert found[str(second["id"])] == "DUP@\uff58.io"
    warnings = [r.getMessage() for r in caplog.records if r.name == "bastion.migrations"]
    assert len(warnings) == 1
    assert str(first["id"]) in warnings[0]
    assert str(second["id"]) in warnings[0]
    assert "x.io" not in warnings[0]
