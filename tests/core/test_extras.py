"""A feature whose extra is not installed fails with a message naming the extra.

Each library is made unimportable for the test (``sys.modules[name] = None``, what Python
reads as "not installed"); the feature then raises :class:`MissingExtra` (a
``ModuleNotFoundError``) or, for a condition, ``ConditionError``, naming the extra.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Callable

import pytest

from bastion.core import redirects
from bastion.core.auth.qr import png_base64
from bastion.core.extras import MissingExtra
from bastion.core.fga import parse_model
from bastion.core.fga.cel import compile_condition
from bastion.core.fga.errors import ConditionError
from bastion.core.origins import OriginPolicy
from bastion.core.reference import Argon2Hasher, AsyncDriver, JwtSigner, MemoryStore, OtpCodes
from tests.core.state_machines.harness import env as make_env

CONDITION_MODEL = """
model
  schema 1.1
type user
type doc
  relations
    define viewer: [user with near]
condition near(x: int) {
  x < 10
}
"""


def _redirect() -> object:
    redirects._ada.cache_clear()
    try:
        return redirects.redirect_allowed(
            "https://a.example/", OriginPolicy([], "https://a.example")
        )
    finally:
        redirects._ada.cache_clear()


def _async_driver() -> object:
    """An AsyncDriver without an ``offload`` of its own takes anyio's worker threads."""
    return AsyncDriver(
        make_env(),
        MemoryStore(),
        hasher=Argon2Hasher(time_cost=1, memory_cost_kib=8),
        signer=JwtSigner("a-server-secret-of-at-least-32-bytes!"),
        codes=OtpCodes(b"k" * 16, secrets),
        randomness=secrets,
    )


@pytest.mark.parametrize(
    ("module", "extra", "use"),
    [
        ("argon2", "argon2", Argon2Hasher),
        ("segno", "qr", lambda: png_base64("otpauth://totp/x")),
        ("ada_url", "redirects", _redirect),
        ("anyio", "anyio", _async_driver),
    ],
)
def test_a_missing_extra_is_named(
    monkeypatch: pytest.MonkeyPatch, module: str, extra: str, use: Callable[[], object]
) -> None:
    for name in [module, *(n for n in sys.modules if n.startswith(f"{module}."))]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtra) as raised:
        use()
    assert raised.value.extra == extra
    assert f"pip install 'bastion-core[{extra}]'" in str(raised.value)
    assert isinstance(raised.value, ModuleNotFoundError)


def test_a_condition_without_its_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    (condition,) = parse_model(CONDITION_MODEL).conditions.values()
    monkeypatch.setitem(sys.modules, "re2", None)
    with pytest.raises(ConditionError, match=r"pip install 'bastion-core\[conditions\]'"):
        compile_condition(condition)
