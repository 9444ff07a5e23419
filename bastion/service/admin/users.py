"""User administration: list, get, update, delete, verification requests, revoke / enable
access, invitations.

Changes that end a user's sessions follow architecture.md ("State that spans stores"):
the SQL side commits first (``revoked_timestamp`` or the ``sessions_valid_after`` marker,
both checked on every token), then the memory-store entries are dropped. If that drop
fails the tokens are dead anyway, so the operation still succeeds. Webhook events and
audit rows are written in the transaction of the change.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import sqlalchemy as sa

from bastion.core.auth.claims import verification_token_claims
from bastion.core.auth.emails import EmailEvent
from bastion.core.auth.links import add_query, verify_email_link
from bastion.core.auth.user import (
    SignupMethod,
    User,
    identity_lock_key,
    identity_lock_keys,
    is_valid_email,
    is_valid_phone_number,
    normalise_email,
)
from bastion.core.auth.verification import VerificationRequest
from bastion.core.errors import FailedPrecondition, InvalidArgument, NotFound
from bastion.service.access import Service
from bastion.service.admin.audit import record_admin_action
from bastion.service.admin.requests import (
    DeleteUserRequest,
    InviteMembersRequest,
    ListRequest,
    ListUsersRequest,
    UpdateUserRequest,
    UserAccessRequest,
    UserRequest,
)
from bastion.service.auth.email_change import EmailChange, prepare_email_change, store_email_change
from bastion.service.auth.mail import compose_mail
from bastion.service.auth.service import AuthService
from bastion.service.context import CallerContext, Reply
from bastion.storage import Storage, admin_users, users, verification
from bastion.storage import passkeys as passkey_rows
from bastion.storage.outbox import enqueue

__all__ = ["UserAdmin"]

log = logging.getLogger("bastion.admin")

EMAIL_TAKEN = "user with given email already exists"
PHONE_TAKEN = "user with given phone number already exists"
_TEXT_FIELDS = ("given_name", "family_name", "middle_name", "nickname", "gender", "birthdate",
                "picture")  # fmt: skip
#: At most this many addresses per invitation request.
MAX_INVITES = 100


def _webhook(conn: sa.Connection, event: str, user: User, now: int) -> None:
    payload = {"event_name": event, "user": user.to_api_dict(), "auth_recipe": ""}
    enqueue(conn, "webhook_event", payload, now=now)


class UserAdmin:
    def __init__(self, service: Service, auth: AuthService, storage: Storage) -> None:
        self._service = service
        self._auth = auth
        self._db = storage.db

    # -- reading ----------------------------------------------------------------------------

    async def users(self, request: ListUsersRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        page = request.pagination
        rows, total = await self._db.run(
            lambda c: users.list_page(c, limit=page.limit, offset=page.offset, query=request.query)
        )
        return Reply({"users": [u.to_api_dict() for u in rows], "pagination": page.describe(total)})

    async def user(self, request: UserRequest, caller: CallerContext) -> Reply:
        """The bare User, by ``id`` or by ``email``."""
        await self._service.require_admin(caller)
        user_id, email = request.id, request.email
        if user_id:
            found = await self._db.run(lambda c: users.get_by_id(c, user_id))
        elif email:
            found = await self._db.run(lambda c: users.get_by_email(c, normalise_email(email)))
        else:
            raise InvalidArgument("invalid params, user id or email is required")
        if found is None:
            raise NotFound("user not found")
        return Reply(found.to_api_dict())

    async def verification_requests(self, request: ListRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        page = request.pagination
        rows, total = await self._db.run(
            lambda c: verification.list_page(c, limit=page.limit, offset=page.offset)
        )
        return Reply({"verification_requests": rows, "pagination": page.describe(total)})

    # -- changing ---------------------------------------------------------------------------

    async def _end_sessions(self, user_id: str) -> None:
        """The memory-store half; the SQL half has committed already."""
        self._auth.sessions.forget_status(user_id)
        try:
            await self._auth.sessions.end_memory_sessions(user_id)
        except Exception:
            # The SQL marker already refuses every token of the user.
            log.warning("could not drop the user's sessions from the memory store",
                        extra={"user_id": user_id}, exc_info=True)  # fmt: skip

    def _roles(self, request: UpdateUserRequest) -> tuple[str, ...] | None:
        value = request.roles
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(r, str) and r for r in value):
            raise InvalidArgument("roles must be a list of strings")
        settings = self._auth.settings
        allowed = set(settings.roles) | set(settings.protected_roles)
        if not set(value) <= allowed:
            raise InvalidArgument("invalid list of roles")
        return tuple(dict.fromkeys(value))

    async def update_user(self, request: UpdateUserRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        user_id = request.id
        if not user_id:
            raise InvalidArgument("user_id is missing")
        changes: dict[str, Any] = {}
        for name in _TEXT_FIELDS:
            if (value := getattr(request, name)) is not None:
                changes[name] = value
        app_data = request.app_data
        if app_data is not None:
            if not isinstance(app_data, dict):
                raise InvalidArgument("malformed app_data")
            changes["app_data"] = app_data
        roles = self._roles(request)
        if roles is not None:
            changes["roles"] = roles
        email = request.email
        if email is not None:
            email = normalise_email(email)
            if not is_valid_email(email):
                raise InvalidArgument("invalid email address")
        phone = request.phone_number
        if phone is not None:
            phone = phone.strip()
            if not is_valid_phone_number(phone):
                raise InvalidArgument("invalid phone number")
        email_verified = request.email_verified
        phone_verified = request.phone_number_verified
        mfa = request.is_multi_factor_auth_enabled
        reset_mfa = request.reset_mfa
        if mfa is True and not self._auth.settings.enable_mfa:
            raise FailedPrecondition(
                "cannot enable multi factor authentication as all mfa services are disabled"
            )
        if mfa is not None:
            changes["is_multi_factor_auth_enabled"] = mfa
        asked = (email, phone, email_verified, phone_verified, reset_mfa)
        if not changes and all(v is None for v in asked):
            raise InvalidArgument("please enter at least one param to update")
        now = int(self._auth.clock.now())
        mail = await self._email_change_mail(user_id, email, email_verified, now)

        def write(conn: sa.Connection) -> tuple[User, bool]:
            user = users.get_by_id(conn, user_id)
            if user is None:
                raise NotFound("user not found")
            update = dict(changes)
            end_sessions = roles is not None and roles != user.roles
            email_changed = email is not None and email != user.email
            if email_changed:
                if users.email_taken(conn, email, exclude_id=user.id):
                    raise InvalidArgument(EMAIL_TAKEN)
                update["email"] = email
                if self._auth.policy.verification_possible:
                    # Unverified until the new address proves itself (its mail goes below);
                    # without verification mail it stays usable, as update_profile keeps it.
                    update["email_verified_at"] = None
                end_sessions = True
            if phone is not None and phone != user.phone_number:
                if users.phone_taken(conn, phone, exclude_id=user.id):
                    raise InvalidArgument(PHONE_TAKEN)
                update.update(phone_number=phone, phone_number_verified_at=None)
                end_sessions = True
            if email_verified is not None:
                update["email_verified_at"] = now if email_verified else None
            if phone_verified is not None:
                update["phone_number_verified_at"] = now if phone_verified else None
            if reset_mfa:
                admin_users.delete_authenticators(conn, user.id)
                end_sessions = True
            mfa_reset: dict[str, Any] = {}
            if reset_mfa:  # set up again from scratch, and a lock_mfa lock ends
                mfa_reset = {
                    "enrolled_mfa_methods": (),
                    "has_skipped_mfa_setup_at": None,
                    "mfa_locked_at": None,
                }
            updated = dataclasses.replace(user, updated_at=now, **update, **mfa_reset)
            users.update(conn, updated)
            if end_sessions:
                users.end_sessions_marker(conn, user.id, valid_after=now)
            if email_changed and mail is not None:
                store_email_change(conn, mail, now)
            changed = sorted({*update, *(["reset_mfa"] if reset_mfa else [])})
            record_admin_action(
                conn, caller, "admin.user_updated", resource_type="user", resource_id=user.id,
                metadata={"fields": changed},
            )  # fmt: skip
            if reset_mfa:
                _webhook(conn, "user.mfa_reset", updated, now)
                record_admin_action(
                    conn, caller, "admin.mfa_reset", resource_type="user", resource_id=user.id
                )
            return updated, end_sessions

        # The same per-identity locks as signup guard the uniqueness checks.
        locks = identity_lock_keys(email=email, phone_number=phone) or (f"user:{user_id}",)
        updated, ended = await self._db.run_locked(locks, write)
        if ended:
            await self._end_sessions(updated.id)
        else:
            self._auth.sessions.forget_status(updated.id)
        return Reply(updated.to_api_dict())

    async def _email_change_mail(
        self, user_id: str, email: str | None, email_verified: bool | None, now: int
    ) -> EmailChange | None:
        """The ``update_email`` verification for a new address, when verification is on
        and the admin did not declare the address verified in the same request."""
        if email is None or email_verified is True or not self._auth.policy.verification_possible:
            return None
        user = await self._db.run(lambda c: users.get_by_id(c, user_id))
        if user is None or user.email == email:
            return None
        return await prepare_email_change(self._auth, dataclasses.replace(user, email=email), now)

    async def delete_user(self, request: DeleteUserRequest, caller: CallerContext) -> Reply:
        await self._service.require_admin(caller)
        # The spec's and Authorizer 2.3's key is the email; 2.4's is the id: either works.
        email, user_id = request.email, request.id
        if not email and not user_id:
            raise InvalidArgument("email is required")
        now = int(self._auth.clock.now())

        def write(conn: sa.Connection) -> User:
            if email:
                user = users.get_by_email(conn, normalise_email(email))
            else:
                user = users.get_by_id(conn, user_id or "")
            if user is None:
                raise NotFound("user not found")
            users.delete(conn, user.id)
            admin_users.delete_otps(conn, email=user.email, phone_number=user.phone_number)
            admin_users.delete_authenticators(conn, user.id)
            passkey_rows.delete_for_user(conn, user.id)
            if user.email:
                verification.delete_for_email(conn, user.email)
            _webhook(conn, "user.deleted", user, now)
            record_admin_action(
                conn, caller, "admin.user_deleted", resource_type="user", resource_id=user.id,
                metadata={"email": user.email or ""},
            )  # fmt: skip
            return user

        user = await self._db.run(write, write=True)
        await self._end_sessions(user.id)
        return Reply({"message": "user deleted successfully"})

    async def _set_access(
        self, request: UserAccessRequest, caller: CallerContext, *, revoke: bool
    ) -> User:
        await self._service.require_admin(caller)
        user_id = request.user_id
        if not user_id:
            raise InvalidArgument("user ID is missing")
        now = int(self._auth.clock.now())
        event, action = (
            ("user.access_revoked", "admin.access_revoked")
            if revoke
            else ("user.access_enabled", "admin.access_enabled")
        )

        def write(conn: sa.Connection) -> User:
            user = users.get_by_id(conn, user_id)
            if user is None:
                raise NotFound("user not found")
            updated = dataclasses.replace(
                user, revoked_timestamp=now if revoke else None, updated_at=now
            )
            users.update(conn, updated)
            if revoke:
                # ``iat`` has whole seconds: a token of this very second must die too.
                users.end_sessions_marker(conn, user.id, valid_after=now + 1)
            _webhook(conn, event, updated, now)
            record_admin_action(conn, caller, action, resource_type="user", resource_id=user.id)
            return updated

        return await self._db.run(write, write=True)

    async def revoke_access(self, request: UserAccessRequest, caller: CallerContext) -> Reply:
        user = await self._set_access(request, caller, revoke=True)
        await self._end_sessions(user.id)
        return Reply({"message": "user access revoked successfully"})

    async def enable_access(self, request: UserAccessRequest, caller: CallerContext) -> Reply:
        user = await self._set_access(request, caller, revoke=False)
        self._auth.sessions.forget_status(user.id)
        return Reply({"message": "user access enabled successfully"})

    # -- invitations ------------------------------------------------------------------------

    async def invite_members(self, request: InviteMembersRequest, caller: CallerContext) -> Reply:
        """Create each new address's user and mail it a link to set a password (or, with
        only magic-link login, to sign in). Invalid or taken addresses are reported, never
        block the valid ones."""
        await self._service.require_admin(caller)
        auth = self._auth
        settings = auth.settings
        if not settings.smtp_host:
            raise FailedPrecondition("email sending is disabled")
        basic = auth.policy.enable_basic_authentication
        if not basic and not auth.policy.enable_magic_link_login:
            raise FailedPrecondition("either basic authentication or magic link login is required")
        emails = request.emails
        if not isinstance(emails, list) or not all(isinstance(e, str) for e in emails):
            raise InvalidArgument("emails must be a list of strings")
        if len(emails) > MAX_INVITES:
            raise InvalidArgument(f"at most {MAX_INVITES} emails per invitation")
        redirect = auth.redirect_uri(request.redirect_uri) or f"{auth.policy.issuer}/app"
        refused: dict[str, str] = {}
        wanted: list[str] = []
        for raw in emails:
            email = normalise_email(raw)
            if not is_valid_email(email):
                refused[raw] = "invalid email address"
            elif email not in wanted:
                wanted.append(email)
        if not wanted:
            raise InvalidArgument("no valid emails found")
        identifier = EmailEvent.INVITE_MEMBER if basic else EmailEvent.MAGIC_LINK_LOGIN
        method = SignupMethod.BASIC_AUTH if basic else SignupMethod.MAGIC_LINK_LOGIN
        invited: list[User] = []
        for email in wanted:
            user = await self._invite(email, identifier, method, redirect, caller)
            if user is None:
                refused[email] = "already exists"
            else:
                invited.append(user)
        message = f"{len(invited)} user(s) invited successfully."
        if refused:
            reasons = ", ".join(f"{email} ({why})" for email, why in refused.items())
            message += f" Not invited: {reasons}."
        return Reply({"message": message, "Users": [u.to_api_dict() for u in invited]})

    async def _invite(
        self,
        email: str,
        identifier: EmailEvent,
        method: SignupMethod,
        redirect: str,
        caller: CallerContext,
    ) -> User | None:
        auth = self._auth
        now = int(auth.clock.now())
        user = User(
            id=auth.ids.new_id(),
            email=email,
            signup_methods=(method.value,),
            roles=tuple(auth.settings.default_roles),
            created_at=now,
            updated_at=now,
        )
        nonce = auth.ids.new_id()
        request = VerificationRequest(
            id=auth.ids.new_id(),
            identifier=identifier.value,
            email=email,
            nonce=nonce,
            redirect_uri=redirect,
            expires_at=now + auth.policy.verification_ttl,
        )
        token = auth.signer.sign(
            verification_token_claims(
                policy=auth.policy,
                email=email,
                identifier=identifier.value,
                nonce=nonce,
                redirect_uri=redirect,
                now=now,
            )
        )
        if identifier is EmailEvent.INVITE_MEMBER:
            link = add_query(
                f"{auth.policy.issuer}/app/setup-password",
                [("token", token), ("redirect_uri", redirect)],
            )
        else:
            link = verify_email_link(auth.policy, token, redirect)
        mail = await compose_mail(
            auth, EmailEvent.INVITE_MEMBER.value, email, {"user": user, "verification_url": link}
        )

        def write(conn: sa.Connection) -> bool:
            if users.insert_unique(conn, user) is not None:
                return False
            verification.replace(conn, request, token=token, now=now)
            enqueue(conn, "mail", dataclasses.asdict(mail), now=now)
            record_admin_action(
                conn, caller, "admin.invite_sent", resource_type="user", resource_id=user.id,
                metadata={"email": email},
            )  # fmt: skip
            return True

        created = await self._db.run_locked(identity_lock_key(email=email), write)
        return user if created else None
