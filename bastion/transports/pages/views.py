"""The hosted login pages under ``/app`` (``--enable-login-page``).

Plain HTML forms posting to the pages' own handlers. Every handler reads its form, then
calls the SAME service operation the REST route calls (``login``, ``signup``,
``verify_otp``, ``resend_otp``, ``magic_link_login``, ``forgot_password``,
``reset_password``, ``logout``, ``meta``; the signed-in pages' in
:mod:`transports.pages.account`) and renders its result: cookies come from the
operation's reply exactly as REST sets them; a refusal re-renders the form with the
service's message tied to its input. No flow rule lives here.

One script, ``static/passkeys.js`` (with ``--enable-passkeys``): the passkey ceremonies
need ``navigator.credentials``, so it runs them over the JSON ``webauthn_*`` operations,
same origin, under the pages' CSP. Its buttons stay hidden without it; every other
method works without any script.

After a successful login the browser goes to ``/authorize?<the original query>`` or an
allowed ``redirect_uri`` (see :mod:`transports.pages.query`) through a small "continue"
page with a meta refresh: a redirect answering the form post would be checked against
the page's ``form-action 'self'`` and blocked when it leaves this origin.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors
from bastion.core.settings import Settings
from bastion.service.auth.requests import (
    ForgotPasswordRequest,
    LoginRequest,
    LogoutRequest,
    MagicLinkLoginRequest,
    ResendOtpRequest,
    ResetPasswordRequest,
    SignupRequest,
    VerifyOtpRequest,
)
from bastion.service.auth.service import AuthService
from bastion.service.context import Cookie, Reply
from bastion.service.passkeys import PasskeyService
from bastion.service.requests import EmptyRequest, decode
from bastion.transports.http.dispatch import View
from bastion.transports.http.wire import query_values
from bastion.transports.pages.account import AccountPages
from bastion.transports.pages.base import LINK_FAILED, PAGES_CSS, PASSKEYS_JS, CallerFactory
from bastion.transports.pages.query import PageQuery
from bastion.transports.pages.render import (
    FormError,
    social_links,
)
from bastion.transports.pages.results import (
    MFA_TEXT,
    challenge_method,
    enrolment_of,
    form_error,
    identifier_field,
    password_hint,
    redirect,
)

__all__ = ["LoginPages", "login_page_views"]


class LoginPages(AccountPages):
    async def _show_login(
        self,
        request: Request,
        query: PageQuery,
        *,
        error: FormError | None = None,
        notice: str = "",
        identifier: str = "",
        cookies: Iterable[Cookie] = (),
    ) -> Response:
        meta = (await self._meta(EmptyRequest(), self.caller(request))).body
        email = bool(meta.get("is_basic_authentication_enabled"))
        phone = bool(meta.get("is_mobile_basic_authentication_enabled"))
        label = (
            "Email address or phone number"
            if email and phone
            else ("Phone number" if phone else "Email address")
        )
        return await self._show(
            request,
            "login.html",
            query,
            error=error,
            notice=notice,
            cookies=cookies,
            title="Sign in",
            password_login=email or phone,
            identifier_label=label,
            identifier=identifier or query.get("login_hint"),
            social=social_links(self.issuer, query, meta),
            next_url=self._next(query),
        )

    async def login_page(self, request: Request) -> Response:
        query = PageQuery.parse(query_values(request))
        if query.refused_redirect(self.auth.redirect_allowed):
            return await self._refused_redirect(request)
        who = await self.auth.authenticate(self.caller(request))
        if who is not None and not query.asks_login(who.auth_time):
            return self._forward(query)
        # An emailed link that failed lands here with ``error=<why>``. The text is never
        # echoed (anyone can write a query): one fixed message says what to do.
        failed = FormError(LINK_FAILED, status=200) if query_values(request).get("error") else None
        return await self._show_login(request, query, error=failed)

    async def login_submit(self, request: Request) -> Response:
        form, query = await self._posted(request)
        identifier = form.get("identifier", "").strip()
        body = {**identifier_field(identifier), "password": form.get("password", "")}
        try:
            reply = await self.auth.login(decode(LoginRequest, body), self.caller(request))
        except errors.ClientError as error:
            return await self._show_login(
                request,
                query,
                error=form_error(error, ("identifier", "password")),
                identifier=identifier,
            )
        return await self._finish(request, reply, query, identifier)

    # -- signup -------------------------------------------------------------------------------

    _SIGNUP_FIELDS = ("email", "given_name", "family_name", "password", "confirm_password")

    async def _show_signup(
        self,
        request: Request,
        query: PageQuery,
        *,
        error: FormError | None = None,
        values: Mapping[str, str],
    ) -> Response:
        meta = (await self._meta(EmptyRequest(), self.caller(request))).body
        kept = {name: values.get(name, "") for name in ("email", "given_name", "family_name")}
        return await self._show(
            request,
            "signup.html",
            query,
            error=error,
            title="Create an account",
            values=kept,
            password_hint=password_hint(meta),
            social=social_links(self.issuer, query, meta),
        )

    async def signup_page(self, request: Request) -> Response:
        query = PageQuery.parse(query_values(request))
        return await self._show_signup(request, query, values={"email": query.get("login_hint")})

    async def signup_submit(self, request: Request) -> Response:
        form, query = await self._posted(request)
        body = {name: form[name] for name in self._SIGNUP_FIELDS if form.get(name)}
        body.setdefault("email", "")
        body.setdefault("password", "")
        body.setdefault("confirm_password", "")
        if query.params:
            # With --enable-email-verification the mailed link returns here, query kept.
            body["redirect_uri"] = f"{self.issuer}{query.url('/app')}"
        try:
            reply = await self.auth.signup(decode(SignupRequest, body), self.caller(request))
        except errors.ClientError as error:
            return await self._show_signup(
                request, query, error=form_error(error, self._SIGNUP_FIELDS), values=form
            )
        return await self._finish(request, reply, query, body["email"])

    # -- the second factor --------------------------------------------------------------------

    async def _finish(
        self, request: Request, reply: Reply, query: PageQuery, identifier: str
    ) -> Response:
        """Render what a login, signup or MFA operation answered; ``identifier`` is the
        email or phone number the user gave, which a second-factor challenge names."""
        body = reply.body
        method = challenge_method(body)
        if method is not None:
            return await self._show_mfa(
                request,
                query,
                method,
                identifier,
                cookies=reply.cookies,
                enrolment=enrolment_of(body),
                passkey=bool(body.get("should_offer_webauthn_mfa_verify")),
            )
        if body.get("access_token"):
            target = query.after_login(self.issuer, self.auth.redirect_allowed)
            if target is None:
                return redirect("/app/profile", reply.cookies)
            return await self._show(
                request,
                "continue.html",
                query,
                cookies=reply.cookies,
                title="Signed in",
                target=target,
            )
        return await self._message(request, query, body.get("message", ""), reply.cookies)

    async def _show_mfa(
        self,
        request: Request,
        query: PageQuery,
        method: str,
        identifier: str,
        *,
        error: FormError | None = None,
        notice: str = "",
        cookies: Iterable[Cookie] = (),
        enrolment: Mapping[str, Any] | None = None,
        passkey: bool = False,
    ) -> Response:
        """``passkey``: the login's answer offered the user's passkey instead (a hint for
        the page only: the passkey operations check the ``mfa`` cookie's challenge)."""
        text = MFA_TEXT[method]
        return await self._show(
            request,
            "mfa.html",
            query,
            error=error,
            notice=notice,
            cookies=cookies,
            title="Verify it's you",
            method=method,
            identifier=identifier,
            enrolment=enrolment,
            instructions=text.instructions,
            code_label=text.code_label,
            code_hint=text.hint,
            resendable=text.resendable,
            passkey=passkey or method == "webauthn",
            next_url=self._next(query),
        )

    def _mfa_method(self, source: Mapping[str, str]) -> str:
        method = source.get("method", "")
        return method if method in MFA_TEXT else "email"

    async def mfa_page(self, request: Request) -> Response:
        """The code page exists only as the answer to a login; opened on its own (a
        bookmark, an expired tab) it sends the browser back to sign in."""
        return redirect(PageQuery.parse(query_values(request)).url("/app"))

    async def mfa_submit(self, request: Request) -> Response:
        form, query = await self._posted(request)
        method = self._mfa_method(form)
        identifier = form.get("identifier", "")
        body = {
            **identifier_field(identifier),
            "otp": form.get("otp", "").strip(),
            "is_totp": method == "totp",
        }
        try:
            reply = await self.auth.verify_otp(decode(VerifyOtpRequest, body), self.caller(request))
        except errors.ClientError as error:
            return await self._show_mfa(
                request,
                query,
                method,
                identifier,
                error=form_error(error, ("otp",)),
                passkey=form.get("passkey") == "1",
            )
        return await self._finish(request, reply, query, identifier)

    async def mfa_resend(self, request: Request) -> Response:
        form, query = await self._posted(request)
        method = self._mfa_method(form)
        identifier = form.get("identifier", "")
        passkey = form.get("passkey") == "1"
        try:
            reply = await self.auth.resend_otp(
                decode(ResendOtpRequest, identifier_field(identifier)), self.caller(request)
            )
        except errors.ClientError as error:
            return await self._show_mfa(
                request, query, method, identifier, error=form_error(error, ()), passkey=passkey
            )
        return await self._show_mfa(
            request,
            query,
            method,
            identifier,
            notice="We have sent you a new code.",
            cookies=reply.cookies,
            passkey=passkey,
        )

    # -- links by email -----------------------------------------------------------------------

    async def magic_link_page(self, request: Request) -> Response:
        query = PageQuery.parse(query_values(request))
        return await self._show(
            request,
            "magic_link.html",
            query,
            title="Sign in by email",
            email=query.get("login_hint"),
        )

    async def magic_link_submit(self, request: Request) -> Response:
        form, query = await self._posted(request)
        email = form.get("email", "").strip()
        # The link's landing returns here (signed in), and the page forwards as after login.
        body = {"email": email, "redirect_uri": f"{self.issuer}{query.url('/app')}"}
        try:
            reply = await self.auth.magic_link_login(
                decode(MagicLinkLoginRequest, body), self.caller(request)
            )
        except errors.ClientError as error:
            return await self._show(
                request,
                "magic_link.html",
                query,
                error=form_error(error, ("email",)),
                title="Sign in by email",
                email=email,
            )
        return await self._message(request, query, reply.body.get("message", ""), reply.cookies)

    async def forgot_password_page(self, request: Request) -> Response:
        query = PageQuery.parse(query_values(request))
        return await self._show(
            request, "forgot_password.html", query, title="Reset your password", email=""
        )

    async def forgot_password_submit(self, request: Request) -> Response:
        form, query = await self._posted(request)
        email = form.get("email", "").strip()
        body: dict[str, Any] = {"email": email}
        if query.params:
            # Keep the query through the mailed link; without one the server's default
            # (--reset-password-url, else this site's reset page) applies.
            body["redirect_uri"] = f"{self.issuer}{query.url('/app/reset-password')}"
        try:
            reply = await self.auth.forgot_password(
                decode(ForgotPasswordRequest, body), self.caller(request)
            )
        except errors.ClientError as error:
            return await self._show(
                request,
                "forgot_password.html",
                query,
                error=form_error(error, ("email",)),
                title="Reset your password",
                email=email,
            )
        return await self._message(request, query, reply.body.get("message", ""), reply.cookies)

    async def _show_set_password(
        self,
        request: Request,
        kind: str,
        query: PageQuery,
        token: str,
        error: FormError | None = None,
    ) -> Response:
        meta = (await self._meta(EmptyRequest(), self.caller(request))).body
        setup = kind == "setup"
        return await self._show(
            request,
            "set_password.html",
            query,
            error=error,
            title="Choose your password" if setup else "Choose a new password",
            action="/app/setup-password" if setup else "/app/reset-password",
            submit="Set password" if setup else "Change password",
            token=token,
            password_hint=password_hint(meta),
        )

    def _set_password_page(self, kind: str) -> Callable[[Request], Awaitable[Response]]:
        async def page(request: Request) -> Response:
            query = PageQuery.parse(query_values(request))
            if query.refused_redirect(self.auth.redirect_allowed):
                return await self._refused_redirect(request)
            return await self._show_set_password(
                request, kind, query, query_values(request).get("token", "")
            )

        return page

    def _set_password_submit(self, kind: str) -> Callable[[Request], Awaitable[Response]]:
        async def submit(request: Request) -> Response:
            form, query = await self._posted(request)
            token = form.get("token", "")
            body = {
                "token": token,
                "password": form.get("password", ""),
                "confirm_password": form.get("confirm_password", ""),
            }
            try:
                reply = await self.auth.reset_password(
                    decode(ResetPasswordRequest, body), self.caller(request)
                )
            except errors.ClientError as error:
                fields = ("password", "confirm_password")
                return await self._show_set_password(
                    request, kind, query, token, form_error(error, fields)
                )
            return await self._show(
                request,
                "message.html",
                query,
                cookies=reply.cookies,
                title="Password saved",
                message=reply.body.get("message", ""),
                next_url=query.url("/app"),
                next_label="Sign in",
            )

        return submit

    # -- the signed-in page -------------------------------------------------------------------

    async def restart_submit(self, request: Request) -> Response:
        """ "Start again" from the code page: the parked login's ``mfa`` cookie goes, so a
        sign-in begun now (a passkey alone, another account) is not taken for its second
        factor."""
        _, query = await self._posted(request)
        return await self._show_login(request, query, cookies=self.auth.cookies.clear_mfa())

    async def logout_submit(self, request: Request) -> Response:
        _, query = await self._posted(request)
        reply = await self.auth.logout(LogoutRequest(), self.caller(request))
        return await self._show_login(
            request, query, notice="You have signed out.", cookies=reply.cookies
        )

    # -- registration -------------------------------------------------------------------------

    def views(self) -> list[View]:
        stylesheet = _asset(PAGES_CSS.read_bytes(), "text/css; charset=utf-8")
        script = _asset(PASSKEYS_JS.read_bytes(), "text/javascript; charset=utf-8")

        views: list[tuple[str, str, Callable[[Request], Awaitable[Response]]]] = [
            ("GET", "/app", self.login_page),
            ("POST", "/app", self.login_submit),
            ("GET", "/app/signup", self.signup_page),
            ("POST", "/app/signup", self.signup_submit),
            ("GET", "/app/mfa", self.mfa_page),
            ("POST", "/app/mfa", self.mfa_submit),
            ("POST", "/app/mfa/resend", self.mfa_resend),
            ("POST", "/app/restart", self.restart_submit),
            ("GET", "/app/magic-link", self.magic_link_page),
            ("POST", "/app/magic-link", self.magic_link_submit),
            ("GET", "/app/forgot-password", self.forgot_password_page),
            ("POST", "/app/forgot-password", self.forgot_password_submit),
            ("GET", "/app/reset-password", self._set_password_page("reset")),
            ("POST", "/app/reset-password", self._set_password_submit("reset")),
            ("GET", "/app/setup-password", self._set_password_page("setup")),
            ("POST", "/app/setup-password", self._set_password_submit("setup")),
            ("GET", "/app/profile", self.profile_page),
            ("POST", "/app/passkeys/rename", self.passkey_rename),
            ("POST", "/app/passkeys/delete", self.passkey_delete),
            ("GET", "/app/sessions", self.sessions_page),
            ("POST", "/app/sessions/revoke", self.session_revoke),
            ("POST", "/app/logout", self.logout_submit),
            ("GET", "/app/assets/pages.css", stylesheet),
            ("GET", "/app/assets/passkeys.js", script),
        ]
        return [View(path, (method,), self._guarded(view)) for method, path, view in views]


def login_page_views(
    settings: Settings,
    auth: AuthService,
    meta: Callable[..., Awaitable[Reply]],
    caller: CallerFactory,
    passkeys: PasskeyService,
) -> list[View]:
    """The pages (mounted only with ``--enable-login-page``)."""
    return LoginPages(settings, auth, meta, caller, passkeys).views()


def _asset(body: bytes, media_type: str) -> Callable[[Request], Awaitable[Response]]:
    async def asset(_: Request) -> Response:
        return Response(
            body, media_type=media_type, headers={"Cache-Control": "public, max-age=3600"}
        )

    return asset
