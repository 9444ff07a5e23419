"""Who the caller is, and the operations on one's own account.

Authentication of a caller: a bearer access token (signature, claims, and the exact token
still in the session store) or else the session cookie (sealed value opens, unexpired,
and equal to the stored one); either way the user's SQL-side status must accept the
token's ``iat`` (not revoked, not issued before ``sessions_valid_after``).
"""

from __future__ import annotations

import dataclasses
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from bastion.core.auth.claims import TokenType, claims_are_valid
from bastion.core.auth.passwords import password_problem
from bastion.core.auth.user import (
    SignupMethod,
    User,
    identity_lock_keys,
    is_valid_email,
    is_valid_phone_number,
    normalise_email,
)
from bastion.core.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from bastion.service.auth.email_change import prepare_email_change, store_email_change
from bastion.service.auth.email_undo import change_notice
from bastion.service.auth.mfa_selfservice import (
    PreparedMfaChange,
    has_fresh_factor,
    prepare_mfa_change,
)
from bastion.service.auth.parts import AuthParts
from bastion.service.auth.requests import (
    DeactivateAccountRequest,
    ProfileRequest,
    UpdateProfileRequest,
    ValidateJwtTokenRequest,
    ValidateSessionRequest,
)
from bastion.service.auth.sessions import ACCESS, REFRESH, SESSION
from bastion.service.context import CallerContext, Cookie, Reply
from bastion.storage import users as user_rows
from bastion.storage.audit import AuditEntry, record
from bastion.storage.outbox import enqueue

if TYPE_CHECKING:
    pass

__all__ = ["RECENT_SIGN_IN_NEEDED", "AccountOperations", "Authenticated"]

RECENT_SIGN_IN_NEEDED = (
    "changing the email address or phone number needs a recent sign-in: "
    "give old_password, or sign in again"
)

UNAUTHORIZED = "unauthorized"
#: Appended to the update message without a space, as the reference does.
EMAIL_CHANGE_SENT = (
    "For the email change we have sent new verification email, please verify and continue"
)
_PROFILE_FIELDS = (
    "given_name",
    "family_name",
    "middle_name",
    "nickname",
    "gender",
    "birthdate",
    "picture",
)


@dataclass(frozen=True, slots=True)
class Authenticated:
    user_id: str
    sid: str
    nonce: str
    login_method: str
    issued_at: int
    roles: tuple[str, ...]
    #: when the user authenticated (a rotated session keeps its login's time)
    auth_time: int


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class AccountOperations(AuthParts):
    """The account operations of :class:`service.auth.service.AuthService`."""

    def _verified(self, token: str) -> dict[str, Any] | None:
        """The token's claims if its signature holds under our key, else None."""
        try:
            return self.signer.verify(token)
        except Unauthenticated:
            return None

    # -- who is calling ---------------------------------------------------------------------

    async def _from_stored(
        self, claims: Mapping[str, Any], kind: str, presented: str
    ) -> Authenticated | None:
        sub, sid, nonce = claims.get("sub"), claims.get("sid"), claims.get("nonce")
        if not (isinstance(sub, str) and isinstance(sid, str) and isinstance(nonce, str)):
            return None
        if not (sub and sid and nonce):
            return None
        stored = await self.sessions.get(sub, sid, nonce, kind)
        if stored is None or not _same(stored, presented):
            return None
        iat = claims.get("iat")
        if not await self.sessions.accepts(sub, iat):
            return None
        roles, auth_time = claims.get("roles"), claims.get("auth_time")
        return Authenticated(
            user_id=sub,
            sid=sid,
            nonce=nonce,
            login_method=str(claims.get("login_method", "")),
            issued_at=int(iat),  # type: ignore[arg-type]  # accepts() proved it an int
            roles=tuple(r for r in roles if isinstance(r, str)) if isinstance(roles, list) else (),
            auth_time=auth_time if type(auth_time) is int else int(iat),  # type: ignore[arg-type]
        )

    async def authenticate(self, caller: CallerContext) -> Authenticated | None:
        now = int(self.clock.now())
        if caller.bearer_token:
            claims = self._verified(caller.bearer_token)
            if claims is not None and claims_are_valid(
                claims, policy=self.policy, token_type=TokenType.ACCESS, now=now
            ):
                found = await self._from_stored(claims, ACCESS, caller.bearer_token)
                if found is not None:
                    return found
        cookie = self.cookies.presented(caller)
        if cookie:
            return await self._from_cookie(cookie, now)
        return None

    async def _from_cookie(self, cookie: str, now: int) -> Authenticated | None:
        claims = self.cookies.open(cookie)
        exp = None if claims is None else claims.get("exp")
        if claims is None or type(exp) is not int or exp <= now:
            return None
        return await self._from_stored(claims, SESSION, cookie)

    async def require_caller(self, caller: CallerContext) -> Authenticated:
        who = await self.authenticate(caller)
        if who is None:
            raise Unauthenticated(UNAUTHORIZED)
        return who

    async def caller_subject(self, caller: CallerContext) -> str:
        """``user:<id>`` of the caller's bearer token or session cookie (FGA subject)."""
        return f"user:{(await self.require_caller(caller)).user_id}"

    async def _user(self, user_id: str) -> User:
        user = await self.storage.db.run(lambda conn: user_rows.get_by_id(conn, user_id))
        if user is None or user.is_revoked:
            raise Unauthenticated(UNAUTHORIZED)
        return user

    # -- sessions across stores -------------------------------------------------------------

    async def end_all_sessions(self, user_id: str) -> None:
        """Every session, access and refresh token of the user ends: the SQL marker moves
        first (so a failed memory-store delete still leaves no live token), then the
        memory-store entries go."""
        now = int(self.clock.now())
        await self.storage.db.run(
            lambda conn: user_rows.end_sessions_marker(conn, user_id, valid_after=now), write=True
        )
        self.sessions.forget_status(user_id)
        await self.sessions.end_memory_sessions(user_id)

    def _audit(self, caller: CallerContext, action: str, user: User) -> AuditEntry:
        return AuditEntry(
            action=action,
            actor_id=user.id,
            actor_email=user.email,
            resource_type="user",
            resource_id=user.id,
            ip_address=caller.client_ip,
            user_agent=caller.user_agent,
            protocol=caller.protocol.value,
        )

    # -- own account ------------------------------------------------------------------------

    async def profile(self, request: ProfileRequest, caller: CallerContext) -> Reply:
        who = await self.require_caller(caller)
        return Reply((await self._user(who.user_id)).to_api_dict())

    async def deactivate_account(
        self, request: DeactivateAccountRequest, caller: CallerContext
    ) -> Reply:
        who = await self.require_caller(caller)
        user = await self._user(who.user_id)
        now = int(self.clock.now())
        gone = dataclasses.replace(user, revoked_timestamp=now, updated_at=now)
        entry = self._audit(caller, "user.deactivated", gone)
        webhook = {"event_name": "user.deactivated", "user": gone.to_api_dict(), "auth_recipe": ""}
        listening = await self.storage.webhook_listeners.listening("user.deactivated")

        def write(conn: sa.Connection) -> None:
            user_rows.update(conn, gone)
            user_rows.end_sessions_marker(conn, gone.id, valid_after=now)
            if listening:
                enqueue(conn, "webhook_event", webhook, now=now)
            record(conn, entry, now=now)

        await self.storage.db.run(write, write=True)
        self.sessions.forget_status(gone.id)
        await self.sessions.end_memory_sessions(gone.id)
        return Reply({"message": "user account deactivated successfully"}, self.cookies.clear())

    async def update_profile(self, request: UpdateProfileRequest, caller: CallerContext) -> Reply:
        """Profile fields, password, email/phone, and the caller's own MFA settings
        (:mod:`core.auth.mfa_settings`: turning MFA off and regenerating recovery codes
        need a fresh second factor)."""
        who = await self.require_caller(caller)
        user = await self._user(who.user_id)
        now = int(self.clock.now())
        changes: dict[str, Any] = {}
        for name in _PROFILE_FIELDS:
            value = getattr(request, name)
            if value is not None:
                changes[name] = value
        app_data = request.app_data
        if app_data is not None:
            changes["app_data"] = app_data
        new_password = await self._password_change(request, user)
        # _password_change checked old_password against the hash: proof enough, once.
        password_proved = new_password is not None and user.password_hash is not None
        new_email = request.email
        new_phone = request.phone_number
        asks_mfa = (
            request.is_multi_factor_auth_enabled is not None
            or request.regenerate_recovery_codes is True
        )
        asked = changes or asks_mfa or new_password is not None or new_email or new_phone
        if not asked:
            raise InvalidArgument("please enter at least one param to update")
        mfa = await prepare_mfa_change(self, who.sid, user, request)
        if mfa is not None and mfa.change.enabled is not None:
            changes["is_multi_factor_auth_enabled"] = mfa.change.enabled
        if new_password is not None:
            changes["password_hash"] = new_password
            user = user.with_signup_method(SignupMethod.BASIC_AUTH)
        new_identity = (new_email and normalise_email(new_email) != (user.email or "")) or (
            new_phone and new_phone.strip() != (user.phone_number or "")
        )
        if new_identity:
            await self._require_recent_proof(who, user, request, password_proved=password_proved)
        email_changed = False
        if new_email and normalise_email(new_email) != (user.email or ""):
            email = normalise_email(new_email)
            if not is_valid_email(email):
                raise InvalidArgument("invalid email address")
            changes["email"] = email
            email_changed = True
            if self.policy.verification_possible:
                changes["email_verified_at"] = None
        if new_phone and new_phone.strip() != (user.phone_number or ""):
            if not is_valid_phone_number(new_phone):
                raise InvalidArgument("invalid phone number")
            changes["phone_number"] = new_phone.strip()
            # A new number is proved like one given at signup: by the code of the next phone
            # login when phone verification is on, else taken as it is.
            verifiable = self.policy.phone_verification_possible
            changes["phone_number_verified_at"] = None if verifiable else now
        updated = dataclasses.replace(user, updated_at=now, **changes)
        message = await self._store_profile(
            updated, email_changed, caller, now, mfa, previous_email=user.email
        )
        cookies: tuple[Cookie, ...] = ()
        if email_changed:
            await self.sessions.end_memory_sessions(updated.id)
            cookies = self.cookies.clear()
        elif new_password is not None:
            # A password change ends the user's OTHER sessions; this one stays.
            await self.sessions.end_memory_sessions(updated.id, keep=(who.sid, who.nonce))
        body: dict[str, Any] = {"message": message}
        if mfa is not None and mfa.recovery_codes:
            body["authenticator_recovery_codes"] = list(mfa.recovery_codes)
        return Reply(body, cookies)

    async def _require_recent_proof(
        self,
        who: Authenticated,
        user: User,
        request: UpdateProfileRequest,
        *,
        password_proved: bool,
    ) -> None:
        """The email address and phone number recover the account: changing one needs a
        sign-in (or second factor) within ``--recent-sign-in-seconds``, or the password
        (``password_proved``: this request's password change checked it already)."""
        if password_proved:
            return
        if self.clock.now() - who.auth_time <= self.settings.recent_sign_in_seconds:
            return
        if await has_fresh_factor(self.storage.memory, who.sid):
            return
        if user.password_hash is not None and request.old_password:
            ok, _ = await self.hasher.verify(user.password_hash, request.old_password)
            if not ok:
                raise InvalidArgument("incorrect old password")
            return
        raise PermissionDenied(RECENT_SIGN_IN_NEEDED)

    async def _password_change(self, request: UpdateProfileRequest, user: User) -> str | None:
        new, confirm = request.new_password, request.confirm_new_password
        old = request.old_password
        if not new and not confirm:
            return None
        if new and not confirm:
            raise InvalidArgument("confirm password is required")
        if confirm and not new:
            raise InvalidArgument("new password is required")
        if user.password_hash is not None:
            if not old:
                raise InvalidArgument("old password is required")
            ok, _ = await self.hasher.verify(user.password_hash, old)
            if not ok:
                raise InvalidArgument("incorrect old password")
        if not (
            self.policy.enable_basic_authentication
            or self.policy.enable_mobile_basic_authentication
        ):
            raise FailedPrecondition("basic authentication is disabled for this instance")
        if new != confirm:
            raise InvalidArgument("password and confirm password does not match")
        problem = password_problem(new, strong=self.policy.enable_strong_password)
        if problem is not None:
            raise InvalidArgument(problem)
        return await self.hasher.hash(new)

    async def _store_profile(
        self,
        updated: User,
        email_changed: bool,
        caller: CallerContext,
        now: int,
        mfa: PreparedMfaChange | None,
        *,
        previous_email: str | None = None,
    ) -> str:
        message = "Profile details updated successfully."
        change = None
        # The old address is told, with a way to undo (service.auth.email_undo).
        notice = (
            change_notice(self, updated, previous_email, now)
            if email_changed and previous_email and self.policy.email_enabled
            else None
        )
        if email_changed and self.policy.verification_possible and updated.email:
            change = await prepare_email_change(self, updated, now)
            message += EMAIL_CHANGE_SENT
        entries = [self._audit(caller, "user.profile_updated", updated)]
        if mfa is not None:
            entries += [self._audit(caller, action, updated) for action in mfa.audit_actions]

        def write(conn: sa.Connection) -> None:
            if mfa is not None:
                mfa.apply(conn, updated.id, now)
            if updated.email and user_rows.email_taken(conn, updated.email, exclude_id=updated.id):
                raise InvalidArgument("user with this email address already exists")
            if updated.phone_number and user_rows.phone_taken(
                conn, updated.phone_number, exclude_id=updated.id
            ):
                raise InvalidArgument("user with given phone number already exists")
            user_rows.update(conn, updated)
            if email_changed:
                user_rows.end_sessions_marker(conn, updated.id, valid_after=now)
            if change is not None:
                store_email_change(conn, change, now)
            if notice is not None:
                enqueue(conn, "mail", dataclasses.asdict(notice), now=now)
            for entry in entries:
                record(conn, entry, now=now)

        # The same per-identity locks as signup guard the uniqueness checks.
        identities = identity_lock_keys(email=updated.email, phone_number=updated.phone_number)
        locks = identities or (f"user:{updated.id}",)
        await self.storage.db.run_locked(locks, write)
        self.sessions.forget_status(updated.id)
        return message

    # -- validation -------------------------------------------------------------------------

    async def validate_jwt_token(
        self, request: ValidateJwtTokenRequest, caller: CallerContext
    ) -> Reply:
        token_type, token = request.token_type, request.token
        if token_type not in (TokenType.ACCESS, TokenType.REFRESH, TokenType.ID):
            raise InvalidArgument("invalid token type")
        claims = self._verified(token) if token else None
        if claims is None:
            raise Unauthenticated("invalid token")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise Unauthenticated("invalid token")
        now = int(self.clock.now())
        exp = claims.get("exp")
        if type(exp) is int and exp <= now:
            raise Unauthenticated("token is expired")
        if not claims_are_valid(claims, policy=self.policy, token_type=token_type, now=now):
            raise Unauthenticated("invalid claims")
        if token_type == TokenType.ID:
            if not await self.sessions.accepts(sub, claims.get("iat")):
                raise Unauthenticated("invalid token")
            granted = claims.get(self.policy.jwt_role_claim, claims.get("roles", []))
        else:
            kind = ACCESS if token_type == TokenType.ACCESS else REFRESH
            if await self._from_stored(claims, kind, token) is None:
                raise Unauthenticated("invalid token")
            granted = claims.get("roles", [])
        if not isinstance(granted, list) or not all(isinstance(r, str) for r in granted):
            raise Unauthenticated("invalid claims")
        if not set(request.roles) <= set(granted):
            raise Unauthenticated(UNAUTHORIZED)
        await self.require_relations(sub, request.required_relations)
        return Reply({"is_valid": True, "claims": claims})

    async def validate_session(
        self, request: ValidateSessionRequest, caller: CallerContext
    ) -> Reply:
        cookie = request.cookie or self.cookies.presented(caller)
        if not cookie:
            raise Unauthenticated(UNAUTHORIZED)
        who = await self._from_cookie(cookie, int(self.clock.now()))
        if who is None:
            raise Unauthenticated(UNAUTHORIZED)
        if not set(request.roles) <= set(who.roles):
            raise Unauthenticated(UNAUTHORIZED)
        await self.require_relations(who.user_id, request.required_relations)
        user = await self._user(who.user_id)
        return Reply({"is_valid": True, "user": user.to_api_dict()})

    async def user_by_id(self, user_id: str) -> User:
        """For the admin operations: NotFound when there is no such user."""
        user = await self.storage.db.run(lambda conn: user_rows.get_by_id(conn, user_id))
        if user is None:
            raise NotFound("user not found")
        return user
