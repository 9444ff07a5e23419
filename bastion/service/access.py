"""The one service layer behind REST, GraphQL and gRPC.

Every API operation is a method here taking a request mapping and a
:class:`~service.context.CallerContext` and returning a
:class:`~service.context.Reply` (or raising a :mod:`core.errors` leaf). Nothing in
this module knows HTTP, GraphQL or gRPC; each surface only parses, calls and renders,
so the three behave the same by construction.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Any, Protocol

from bastion.core import admin
from bastion.core.errors import InvalidArgument, ResourceExhausted, Unauthenticated
from bastion.core.settings import Settings
from bastion.service.audit import record_admin_action
from bastion.service.context import CallerContext, Cookie, Reply
from bastion.service.requests import EmptyRequest
from bastion.service.system import build_version
from bastion.storage import Storage


class _SubjectResolver(Protocol):
    """What the authentication flows tell this layer: whose token or session it is."""

    async def caller_subject(self, caller: CallerContext) -> str: ...


SOCIAL_PROVIDERS = (
    "google",
    "github",
    "facebook",
    "microsoft",
    "twitch",
    "linkedin",
    "apple",
    "discord",
    "twitter",
    "roblox",
)

#: Wrong admin secrets (login or header, together) per client address and window; past
#: it that address gets 429 with no check at all until the window ends. Per address
#: only: a guesser locks out itself, never the operator elsewhere.
ADMIN_SECRET_FAILURES = 10
ADMIN_SECRET_WINDOW_SECONDS = 900
TOO_MANY_ADMIN_GUESSES = "too many wrong admin secrets from this address, please try again later"


@dataclass(frozen=True, slots=True, kw_only=True)
class AdminLoginRequest:
    admin_secret: str = ""


class Service:
    def __init__(self, settings: Settings, storage: Storage) -> None:
        self.settings = settings
        self.storage = storage
        self.version = build_version()
        #: The authentication flows (``service.auth``), attached by the Runtime.
        self.auth: _SubjectResolver | None = None
        #: The admin secret, and during a rotation the one it replaces.
        self._admin_secrets = tuple(
            secret for secret in (settings.admin_secret, settings.admin_secret_previous) if secret
        )

    # -- public -------------------------------------------------------------------------

    def _meta(self) -> dict[str, Any]:
        s = self.settings
        result: dict[str, Any] = {"version": self.version, "client_id": s.client_id}
        for provider in SOCIAL_PROVIDERS:
            client_id = getattr(s, f"{provider}_client_id", "")
            secret = getattr(s, f"{provider}_client_secret", "")
            result[f"is_{provider}_login_enabled"] = bool(client_id and secret)
        result.update(
            is_email_verification_enabled=s.enable_email_verification,
            is_basic_authentication_enabled=s.enable_basic_authentication,
            is_magic_link_login_enabled=s.enable_magic_link_login,
            is_sign_up_enabled=s.enable_signup,
            is_strong_password_enabled=s.enable_strong_password,
            is_multi_factor_auth_enabled=s.enable_mfa,
            is_mobile_basic_authentication_enabled=s.enable_mobile_basic_authentication,
            is_phone_verification_enabled=s.enable_phone_verification,
            # Authorizer 2.4's name for passkeys (--enable-passkeys)
            is_webauthn_enabled=s.enable_passkeys,
        )
        return result

    async def caller_subject(self, caller: CallerContext) -> str:
        """``user:<id>`` of the caller's access token or session cookie (FGA subject)."""
        if self.auth is None:
            raise Unauthenticated("unauthorized")
        return await self.auth.caller_subject(caller)

    async def meta(self, request: EmptyRequest, caller: CallerContext) -> Reply:
        """Server feature flags and provider availability (reference §2.3 ``Meta``)."""
        return Reply(self._meta())

    # -- super-admin session --------------------------------------------------------------

    def _admin_cookie(self, value: str, max_age: int) -> Cookie:
        return Cookie(
            name=admin.ADMIN_COOKIE,
            value=value,
            max_age=max_age,
            secure=self.settings.admin_cookie_secure,
            same_site="Strict",
        )

    async def _new_admin_session(self) -> Cookie:
        session_id = str(uuid.uuid4())
        expires_at = int(time.time()) + admin.ADMIN_SESSION_SECONDS
        await self.storage.memory.set(
            f"admin_session:{session_id}", b"1", admin.ADMIN_SESSION_SECONDS
        )
        value = admin.mint_admin_cookie(self.settings.admin_secret, session_id, expires_at)
        return self._admin_cookie(value, admin.ADMIN_SESSION_SECONDS)

    async def _admin_session_id(self, caller: CallerContext) -> str | None:
        value = caller.cookies.get(admin.ADMIN_COOKIE)
        if not value:
            return None
        session_id = None
        for secret in self._admin_secrets:
            session_id = session_id or admin.read_admin_cookie(secret, value, time.time())
        if session_id is None:
            return None
        if await self.storage.memory.get(f"admin_session:{session_id}") is None:
            return None
        return session_id

    async def is_admin(self, caller: CallerContext) -> bool:
        """The admin header (unless ``--disable-admin-header-auth``) or a live admin cookie."""
        header = caller.admin_secret_header
        if header and not self.settings.disable_admin_header_auth:
            return await self._secret_matches(caller, header)
        return await self._admin_session_id(caller) is not None

    async def _secret_matches(self, caller: CallerContext, secret: str) -> bool:
        """Compare (in constant time) within the address's budget of wrong secrets.

        Only wrong secrets count, each distinct one once (the same guess twice teaches
        nothing), and the count is taken atomically with the guess: parallel guesses get
        at most the budget's worth of verdicts; the rest get 429. An address whose budget
        is spent gets 429 for the right secret too, so nothing tells the two apart; the
        right secret below the budget always passes, however many calls are in flight.
        """
        memory = self.storage.memory
        key = f"throttle:admin_secret:{caller.client_ip}"
        # Every accepted secret compared, always: the time tells nothing of which matched.
        right = any([admin.secret_matches(known, secret) for known in self._admin_secrets])
        spent = await memory.get(key)
        if spent is not None and int(spent) >= ADMIN_SECRET_FAILURES:
            raise ResourceExhausted(TOO_MANY_ADMIN_GUESSES, retry_after=ADMIN_SECRET_WINDOW_SECONDS)
        if right:
            return True
        guess = hashlib.sha256(secret.encode()).hexdigest()[:32]
        fresh = await memory.set_if_absent(f"{key}:{guess}", b"1", ttl=ADMIN_SECRET_WINDOW_SECONDS)
        if (
            fresh
            and await memory.incr(key, ttl=ADMIN_SECRET_WINDOW_SECONDS) > ADMIN_SECRET_FAILURES
        ):
            raise ResourceExhausted(TOO_MANY_ADMIN_GUESSES, retry_after=ADMIN_SECRET_WINDOW_SECONDS)
        return False

    async def require_admin(self, caller: CallerContext) -> None:
        if not await self.is_admin(caller):
            raise Unauthenticated("unauthorized")

    async def _audit_admin(self, caller: CallerContext, action: str) -> None:
        await self.storage.db.run(
            lambda c: record_admin_action(
                c, caller, action, resource_type="admin_session", resource_id=""
            ),
            write=True,
        )

    async def admin_login(self, request: AdminLoginRequest, caller: CallerContext) -> Reply:
        secret = request.admin_secret
        if not secret:
            raise InvalidArgument("admin_secret is required")
        if not await self._secret_matches(caller, secret):
            await self._audit_admin(caller, "admin.login_failed")
            raise Unauthenticated("invalid admin secret")
        await self._audit_admin(caller, "admin.login_success")
        return Reply(
            {"message": "admin logged in successfully"}, (await self._new_admin_session(),)
        )

    async def admin_logout(self, request: EmptyRequest, caller: CallerContext) -> Reply:
        await self.require_admin(caller)
        session_id = await self._admin_session_id(caller)
        if session_id is not None:
            await self.storage.memory.delete(f"admin_session:{session_id}")
        await self._audit_admin(caller, "admin.logout")
        return Reply({"message": "admin logged out successfully"}, (self._admin_cookie("", 0),))

    async def admin_session(self, request: EmptyRequest, caller: CallerContext) -> Reply:
        await self.require_admin(caller)
        old = await self._admin_session_id(caller)
        if old is not None:
            await self.storage.memory.delete(f"admin_session:{old}")
        return Reply(
            {"message": "admin session refreshed successfully"},
            (await self._new_admin_session(),),
        )

    async def admin_meta(self, request: EmptyRequest, caller: CallerContext) -> Reply:
        await self.require_admin(caller)
        s = self.settings
        return Reply(
            {
                **self._meta(),
                "roles": list(s.roles),
                "default_roles": list(s.default_roles),
                "protected_roles": list(s.protected_roles),
            }
        )
