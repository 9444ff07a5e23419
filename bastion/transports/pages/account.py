"""The signed-in pages: the profile (with the user's passkeys) and where the user is
signed in, with their forms.

Each form calls the operation its REST route calls: ``profile``, ``webauthn_credentials``,
``webauthn_rename_credential``, ``webauthn_delete_credential``, ``sessions`` and
``revoke_session``. Registering a passkey needs the authenticator, which no HTML form
can reach: ``static/passkeys.js`` runs that ceremony over the JSON operations.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors
from bastion.service.auth.session_list import RevokeSessionRequest
from bastion.service.context import CallerContext, Reply
from bastion.service.passkeys.service import DeleteCredentialRequest, RenameCredentialRequest
from bastion.service.requests import EmptyRequest, decode
from bastion.transports.http.wire import query_values
from bastion.transports.pages.base import PageBase
from bastion.transports.pages.query import PageQuery
from bastion.transports.pages.render import FormError
from bastion.transports.pages.results import form_error, redirect

__all__ = ["AccountPages"]

#: A page of the account: renders with the user, or with a refusal or a confirmation.
_Page = Callable[..., Awaitable[Response]]


class AccountPages(PageBase):
    async def _meta_of(self, request: Request) -> Mapping[str, Any]:
        return (await self._meta(EmptyRequest(), self.caller(request))).body

    # -- the profile --------------------------------------------------------------------------

    async def _show_profile(
        self,
        request: Request,
        query: PageQuery,
        *,
        error: FormError | None = None,
        notice: str = "",
    ) -> Response:
        user = await self._signed_in(request)
        if user is None:
            return redirect(query.url("/app"))
        name = " ".join(p for p in (user.get("given_name"), user.get("family_name")) if p)
        details = [
            ("Name", name),
            ("Email", user.get("email") or ""),
            ("Email verified", "Yes" if user.get("email_verified") else "No"),
            ("Phone number", user.get("phone_number") or ""),
            ("Roles", ", ".join(user.get("roles") or ())),
        ]
        passkeys: list[Mapping[str, Any]] = []
        if (await self._meta_of(request)).get("is_webauthn_enabled"):
            listing = await self.passkeys.webauthn_credentials(EmptyRequest(), self.caller(request))
            passkeys = listing.body["webauthn_credentials"]
        return await self._show(
            request,
            "profile.html",
            query,
            error=error,
            notice=notice,
            title="Your account",
            user=user,
            details=[(label, value) for label, value in details if value],
            passkeys=passkeys,
        )

    async def profile_page(self, request: Request) -> Response:
        return await self._show_profile(request, PageQuery.parse(query_values(request)))

    async def passkey_rename(self, request: Request) -> Response:
        form, query = await self._posted(request)
        body = {"id": form.get("id", ""), "name": form.get("name", "")}
        return await self._act(
            request,
            query,
            lambda caller: self.passkeys.webauthn_rename_credential(
                decode(RenameCredentialRequest, body), caller
            ),
            self._show_profile,
            "Passkey renamed.",
        )

    async def passkey_delete(self, request: Request) -> Response:
        form, query = await self._posted(request)
        body = {"id": form.get("id", "")}
        return await self._act(
            request,
            query,
            lambda caller: self.passkeys.webauthn_delete_credential(
                decode(DeleteCredentialRequest, body), caller
            ),
            self._show_profile,
            "Passkey deleted.",
        )

    # -- where the user is signed in ----------------------------------------------------------

    async def _show_sessions(
        self,
        request: Request,
        query: PageQuery,
        *,
        error: FormError | None = None,
        notice: str = "",
    ) -> Response:
        try:
            listing = await self.auth.sessions_of_caller(EmptyRequest(), self.caller(request))
        except errors.Unauthenticated:
            return redirect(query.url("/app"))
        return await self._show(
            request,
            "sessions.html",
            query,
            error=error,
            notice=notice,
            title="Where you are signed in",
            sessions=listing.body["sessions"],
        )

    async def sessions_page(self, request: Request) -> Response:
        return await self._show_sessions(request, PageQuery.parse(query_values(request)))

    async def session_revoke(self, request: Request) -> Response:
        form, query = await self._posted(request)
        body = {"id": form.get("id", "")}
        return await self._act(
            request,
            query,
            lambda caller: self.auth.revoke_session(decode(RevokeSessionRequest, body), caller),
            self._show_sessions,
            "That session is signed out.",
        )

    # -- shared -------------------------------------------------------------------------------

    async def _act(
        self,
        request: Request,
        query: PageQuery,
        operation: Callable[[CallerContext], Awaitable[Reply]],
        page: _Page,
        done: str,
    ) -> Response:
        """Run a signed-in form's operation, then show its page again with the outcome; a
        browser no longer signed in goes to sign in."""
        try:
            await operation(self.caller(request))
        except errors.Unauthenticated:
            return redirect(query.url("/app"))
        except errors.ClientError as error:
            return await page(request, query, error=form_error(error, ()))
        return await page(request, query, notice=done)
