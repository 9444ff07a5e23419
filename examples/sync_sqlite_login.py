"""Sign-up, password login and an emailed code, synchronously, over sqlite3: the storage
(``SqliteStore``, the ``Storage`` protocol of ``bastion.core.reference``) and the run.

Run: ``python examples/sync_sqlite_login.py``. It prints each step and exits non-zero
when an outcome is not the expected one.
"""

import pickle
import secrets
import sqlite3
import sys
import time
from functools import partial
from types import SimpleNamespace

import bastion.core.state_machines as flows
from bastion.core.auth.mfa import MfaPolicy
from bastion.core.auth.otp import derive_key
from bastion.core.auth.policy import AuthPolicy, FlowEnv
from bastion.core.errors import BastionError
from bastion.core.reference import Argon2Hasher, JwtSigner, OtpCodes, SyncDriver

SCHEMA = """create table if not exists users (id text primary key, email text unique,
    phone_number text unique, row blob);
create table if not exists records (kind text, key text, value, primary key (kind, key));
create table if not exists outbox (id integer primary key, kind text, item blob);"""


class SqliteStore:
    """One statement per method; ``begin`` takes sqlite's write lock, so a ``swap`` inside
    a transaction is a compare-and-set, and a ``take`` (one DELETE) has one winner. Rows
    are pickled: this store reads only what it wrote."""

    def __init__(self, path: str = ":memory:") -> None:
        self.db = sqlite3.connect(path, isolation_level=None, timeout=30)
        self.db.executescript(SCHEMA)
        verbs = ("begin immediate", "commit", "rollback")
        self.begin, self.commit, self.rollback = (partial(self.db.execute, v) for v in verbs)

    def one(self, query: str, *args: object) -> object:
        row = self.db.execute(query, args).fetchone()
        return row and pickle.loads(row[0])  # noqa: S301

    def find_user(self, by: str, value: str) -> flows.User | None:  # by: a column's name
        return self.one(f"select row from users where {by} = ?", value)  # noqa: S608

    def insert_user(self, user: flows.User, verb: str = "insert or ignore") -> bool:
        row = (user.id, user.email or None, user.phone_number or None, pickle.dumps(user))
        return self.db.execute(f"{verb} into users values (?, ?, ?, ?)", row).rowcount == 1

    def save_user(self, user: flows.User) -> None:
        self.insert_user(user, "replace")

    def get(self, kind: str, key: str) -> object:
        return self.one("select value from records where kind = ? and key = ?", kind, key)

    def put(self, kind: str, key: str, value: object) -> None:
        self.db.execute("replace into records values (?, ?, ?)", (kind, key, pickle.dumps(value)))

    def take(self, kind: str, key: str) -> object:
        return self.one("delete from records where kind = ? and key = ? returning value", kind, key)

    def swap(self, kind: str, key: str, old: object, new: object) -> bool:
        return self.get(kind, key) == old and not self.put(kind, key, new)  # inside a begin

    def incr(self, kind: str, key: str) -> int:
        self.put(kind, key, (self.get(kind, key) or 0) + 1)  # inside a begin
        return self.get(kind, key)

    def emit(self, item: object) -> None:
        row = (type(item).__name__, pickle.dumps(item))
        self.db.execute("insert into outbox values (null, ?, ?)", row)


def check(what: str, ok: bool) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        sys.exit(1)


def main() -> None:
    secret, password = "change-me-to-32-or-more-random-bytes!!", "Correct-horse-7"
    policy = AuthPolicy(url="https://auth.example.com", client_id="example", email_enabled=True)
    clock = SimpleNamespace(now=time.time, new_id=lambda: secrets.token_hex(16))
    env, store = FlowEnv(policy=policy, clock=clock, ids=clock), SqliteStore()
    mfa = MfaPolicy(enable_mfa=True, enable_email_otp=True, email_enabled=True)
    driver = SyncDriver(
        env, store, hasher=Argon2Hasher(), signer=JwtSigner(secret), randomness=secrets,
        codes=OtpCodes(derive_key(secret), secrets), mfa_policy=mfa,
    )  # fmt: skip
    ann = {"email": "a@example.com", "password": password}
    signup = flows.SignupRequested(**ann, confirm_password=password)
    check("ann signs up", bool(driver.run(flows.SignupMachine(env), signup).access_token))
    login = flows.LoginRequested(**ann)
    sent = driver.run(flows.LoginMachine(env), login)
    check(f"her password asks for a code: {sent.message!r}", sent.should_show_email_otp_screen)
    mail = store.one("select item from outbox where kind = 'SendEmail' order by id desc")
    mfa_cookie = driver.cookies["mfa"]
    verify = flows.VerifyOtpRequested(challenge_id=mfa_cookie, code=mail.otp, email=mail.to)
    done = driver.run(flows.MfaMachine(env), verify)
    user = store.find_user("email", mail.to)
    check(f"the mailed code signs {user.id} in", bool(done.access_token))
    try:
        driver.run(flows.MfaMachine(env), verify)
        check("the same code works twice", False)
    except BastionError as error:
        check(f"the code works once ({error.code})", error.code == "unauthenticated")


if __name__ == "__main__":
    main()
