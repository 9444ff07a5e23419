"""``bastion import authorizer`` against an Authorizer 2.3 database built the way Authorizer
builds it (tests/moving/authorizer_db.py), on SQLite and on PostgreSQL, imported twice:
then a bastion server on the imported database signs the old users in with their old
passwords through Authorizer's own client (authorizer-js) and over gRPC."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import grpc
import pyotp
import pytest
import sqlalchemy as sa

from bastion.core.auth.totp import recovery_digest
from bastion.transports.grpc.proto.authorizer.v1 import authorizer_pb2, authorizer_pb2_grpc
from tests.dbfixtures import fresh_postgres_url, fresh_sqlite_url
from tests.moving.authorizer_db import FGA_MODEL_ID, AuthorizerDeployment, build
from tests.node_project import node_for
from tests.server.harness import (
    ADMIN_SECRET,
    BASTION,
    CLIENT_ID,
    CLIENT_SECRET,
    base_flags,
    running,
)

pytestmark = pytest.mark.slow

JS_PROJECT = Path(__file__).parents[1] / "authorizer_js"


@dataclass
class Moved:
    deployment: AuthorizerDeployment
    #: bastion's database flags
    flags: list[str]
    source: list[str]
    tmp: Path

    def run(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return bastion("import", "authorizer", *self.source, *self.flags, *extra, cwd=self.tmp)


def bastion(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASTION, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def summary(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """``kind: counts`` lines of an import's summary."""
    assert done.returncode == 0, done.stderr
    rows = [line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line]
    return {kind: counts for kind, counts in rows if not kind.startswith(" ")}


@pytest.fixture(params=["sqlite", "postgres"])
def moved(request: pytest.FixtureRequest, tmp_path: Path) -> Moved:
    deployment = AuthorizerDeployment()
    if request.param == "sqlite":
        source_path = tmp_path / "authorizer.db"
        build(f"sqlite:///{source_path}", deployment, fga=True)
        source = ["--from-database-type=sqlite", f"--from-database-url={source_path}"]
        target = fresh_sqlite_url(tmp_path, "moved")
        flags = ["--database-type=sqlite", f"--database-url={target}"]
    else:
        source_url = fresh_postgres_url("authorizer")
        build(source_url.replace("postgresql://", "postgresql+psycopg://"), deployment, fga=True)
        source = ["--from-database-type=postgres", f"--from-database-url={source_url}"]
        flags = ["--database-type=postgres", f"--database-url={fresh_postgres_url('moved')}"]
    migrated = bastion("migrate", *flags, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    return Moved(deployment, flags, source, tmp_path)


def test_an_authorizer_deployment_moves_in_and_its_users_sign_in(moved: Moved) -> None:
    secrets = [
        f"--from-jwt-secret={moved.deployment.jwt_secret}",
        f"--client-secret={CLIENT_SECRET}",
    ]
    dry = moved.run(*secrets, "--dry-run")
    assert summary(dry)["users"] == "4 imported, 0 updated, 0 unchanged, 0 skipped"
    assert "dry run: nothing was written" in dry.stdout
    first = summary(moved.run(*secrets))
    assert first["users"] == "4 imported, 0 updated, 0 unchanged, 0 skipped"
    for kind in ("webhooks", "webhook logs", "email templates", "audit logs", "authenticators"):
        assert first[kind] == "1 imported, 0 updated, 0 unchanged, 0 skipped", kind
    assert first["verification requests"] == "0 imported, 0 updated, 0 unchanged, 1 skipped"
    assert first["authorization model"] == "1 imported, 0 updated, 0 unchanged, 0 skipped"
    assert first["authorization tuples"] == "3 imported, 0 updated, 0 unchanged, 0 skipped"
    assert first["sessions"] == "0 imported, 0 updated, 0 unchanged, 1 skipped"
    again = summary(moved.run(*secrets))
    assert again["users"] == "0 imported, 0 updated, 4 unchanged, 0 skipped"
    assert again["authenticators"] == "0 imported, 0 updated, 1 unchanged, 0 skipped"
    assert again["authorization model"] == "0 imported, 0 updated, 1 unchanged, 0 skipped"
    assert again["authorization tuples"] == "0 imported, 0 updated, 3 unchanged, 0 skipped"

    deployment, ids = moved.deployment, moved.deployment.ids
    with running([*server_flags(moved.flags), "--enable-mfa", "--enable-totp-login",
                  "--enforce-mfa=false", "--roles=user,editor"], moved.tmp) as server:  # fmt: skip
        # authorizer-js, unchanged, against the moved deployment
        ada = js_login(server.url, "ada@example.com", deployment.passwords["ada"])
        assert ada["has_access_token"], ada
        assert ada["user"]["id"] == ids["ada"]
        assert ada["user"]["given_name"] == "Ada"
        assert sorted(ada["user"]["roles"]) == ["editor", "user"]
        assert ada["user"]["app_data"] == {"plan": "ada-plan", "seats": 3}
        refused = js_login(server.url, "revoked@example.com", deployment.passwords["revoked"])
        assert "error" in refused, refused
        unverified = js_login(
            server.url, "unverified@example.com", deployment.passwords["unverified"]
        )
        assert "error" in unverified, unverified
        # over gRPC
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = authorizer_pb2_grpc.AuthorizerServiceStub(channel)
            answer = stub.Login(
                authorizer_pb2.LoginRequest(
                    email="ada@example.com", password=deployment.passwords["ada"]
                )
            )
            assert answer.user.id == ids["ada"]
            assert answer.access_token
        # Authorizer's authorization model and tuples answer ada's own checks
        with server.client() as client:
            checks = [{"relation": "viewer", "object": f"doc:{doc}"}
                      for doc in ("readme", "plan", "other")]  # fmt: skip
            answered = client.post(
                "/v1/check_permissions", json={"checks": checks},
                headers={"Authorization": f"Bearer {answer.access_token}"},
            )  # fmt: skip
            assert answered.status_code == 200, answered.text
            assert [r["allowed"] for r in answered.json()["results"]] == [True, True, False]
            model = client.get(
                "/v1/admin/fga/model", headers={"x-service-admin-secret": ADMIN_SECRET}
            )
            assert model.json()["id"] == FGA_MODEL_ID  # the id clients pinned is kept
            assert "condition in_office(ip: ipaddress)" in model.json()["dsl"]
        # the authenticator app still signs its user in, with Authorizer's secret
        with server.client() as client:
            parked = client.post(
                "/v1/login",
                json={"email": "totp@example.com", "password": deployment.passwords["totp"]},
            )
            assert parked.status_code == 200, parked.text
            assert parked.json()["should_show_totp_screen"] is True
            code = pyotp.TOTP(deployment.totp_secret).now()
            done = client.post(
                "/v1/verify_otp",
                json={"email": "totp@example.com", "otp": code, "is_totp": True},
                headers={"cookie": f"mfa={parked.cookies['mfa']}"},
            )
            assert done.status_code == 200, done.text
            assert done.json()["user"]["id"] == ids["totp"]
            admin = {"x-service-admin-secret": ADMIN_SECRET}
            hooks = client.post("/v1/admin/webhooks", json={}, headers=admin).json()
            assert [h["endpoint"] for h in hooks["webhooks"]] == ["https://hooks.example.com/in"]
            templates = client.post("/v1/admin/email_templates", json={}, headers=admin).json()
            assert [t["event_name"] for t in templates["email_templates"]] == ["basic_auth_signup"]
    stored = stored_users(moved.flags)
    # the bcrypt hash became argon2id at the first sign-in, the others' stayed as they were
    assert stored[ids["ada"]]["password"].startswith("$argon2id$")
    assert stored[ids["revoked"]]["password"].startswith("$2a$10$")
    assert stored[ids["unverified"]]["email_verified_at"] is None
    assert stored[ids["revoked"]]["revoked_timestamp"] == deployment.now - 50
    digests = json.loads(stored_authenticator(moved.flags, ids["totp"]))
    assert digests == [recovery_digest("AAAAA-BBBBB")]  # the used code is not carried over


def test_a_row_changed_in_authorizer_since_updates_and_nothing_else(moved: Moved) -> None:
    assert moved.run().returncode == 0
    source = moved.source[1].split("=", 1)[1]
    later = moved.deployment.now + 10
    statement = (
        "update authorizer_users set given_name = 'Adeline', updated_at = :at where id = :id"
    )
    url = f"sqlite:///{source}" if moved.source[0].endswith("sqlite") else source
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(sa.text(statement), {"at": later, "id": moved.deployment.ids["ada"]})
    engine.dispose()
    again = summary(moved.run())
    assert again["users"] == "0 imported, 1 updated, 3 unchanged, 0 skipped"
    # without bastion's --client-secret and Authorizer's --jwt-secret, the app is named
    assert again["authenticators"] == "0 imported, 0 updated, 0 unchanged, 1 skipped"
    assert stored_users(moved.flags)[moved.deployment.ids["ada"]]["given_name"] == "Adeline"


def test_flags_that_name_no_authorizer_database_are_refused(tmp_path: Path) -> None:
    flags = ["--database-type=sqlite", f"--database-url={fresh_sqlite_url(tmp_path)}"]
    assert bastion("migrate", *flags, cwd=tmp_path).returncode == 0
    missing = bastion("import", "authorizer", *flags, cwd=tmp_path)
    assert missing.returncode == 2
    assert "give --from-database-type and --from-database-url" in missing.stderr
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    wrong = bastion(
        "import", "authorizer", "--from-database-type=sqlite", f"--from-database-url={empty}",
        *flags, cwd=tmp_path,
    )  # fmt: skip
    assert wrong.returncode == 1
    assert "no authorizer_users table" in wrong.stderr


# ------------------------------------------------------------------------------------ helpers


def server_flags(database: list[str]) -> list[str]:
    kind, url = (flag.split("=", 1)[1] for flag in database)
    return base_flags(kind, url)


def js_login(url: str, email: str, password: str) -> dict[str, object]:
    installed = JS_PROJECT / "node_modules" / "@authorizerdev" / "authorizer-js" / "package.json"
    node = node_for(JS_PROJECT, installed, "the move-in test signs in through authorizer-js")
    done = subprocess.run(
        [node, "login.mjs", url, CLIENT_ID, email, password],
        cwd=JS_PROJECT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def _engine(flags: list[str]) -> sa.Engine:
    kind, url = (flag.split("=", 1)[1] for flag in flags)
    if kind == "sqlite":
        return sa.create_engine(f"sqlite:///{url}")
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))


def stored_users(flags: list[str]) -> dict[str, dict[str, object]]:
    engine = _engine(flags)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("select * from service_users")).mappings().all()
    engine.dispose()
    return {row["id"]: dict(row) for row in rows}


def stored_authenticator(flags: list[str], user_id: str) -> str:
    engine = _engine(flags)
    with engine.connect() as conn:
        found = conn.execute(
            sa.text("select recovery_codes from service_authenticators where user_id = :u"),
            {"u": user_id},
        ).scalar_one()
    engine.dispose()
    return str(found)
