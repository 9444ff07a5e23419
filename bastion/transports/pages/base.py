"""The base of the hosted login pages: rendering a page, reading a posted form, the
hand-over to the caller's redirect, and the guard every form post passes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from bastion.core import errors
from bastion.core.settings import Settings
from bastion.service.auth.requests import ProfileRequest
from bastion.service.auth.service import AuthService
from bastion.service.context import CallerContext, Cookie, Reply
from bastion.service.passkeys import PasskeyService
from bastion.service.requests import EmptyRequest
from bastion.transports.http.cookies import with_cookies
from bastion.transports.http.errors import http_status
from bastion.transports.http.wire import form_values
from bastion.transports.pages.csrf import FormGuard
from bastion.transports.pages.query import HIDDEN_PREFIX, PageQuery
from bastion.transports.pages.render import (
    Branding,
    FormError,
    PageContext,
    render,
)
from bastion.transports.pages.results import (
    redirect,
)

__all__ = ["LINK_FAILED", "PAGES_CSS", "PASSKEYS_JS", "CallerFactory", "PageBase"]

log = logging.getLogger("bastion.pages")

CallerFactory = Callable[[Request], CallerContext]

_HTML = "text/html; charset=utf-8"
PAGES_CSS = Path(__file__).with_name("static") / "pages.css"
#: The one script: passkey ceremonies, which no HTML form can run (progressive enhancement).
PASSKEYS_JS = Path(__file__).with_name("static") / "passkeys.js"


LINK_FAILED = (
    "That link did not work: it may have expired or been used already. "
    "Sign in, or ask for a new link."
)


class _FormRefused(Exception):
    """A form post that failed the CSRF checks; never reaches the service."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PageBase:
    """What every login page shares: rendering, the posted form, the session check,
    the hand-over to the caller's redirect, and the CSRF and rate-limit guard."""

    def __init__(
        self,
        settings: Settings,
        auth: AuthService,
        meta: Callable[..., Awaitable[Reply]],
        caller: CallerFactory,
        passkeys: PasskeyService,
    ) -> None:
        self.auth = auth
        self.passkeys = passkeys
        self.issuer = auth.policy.issuer
        self.branding = Branding.from_settings(settings)
        self.guard = FormGuard(
            settings.client_secret,
            secure=settings.app_cookie_secure,
            origin_allowed=auth.redirect_allowed,
        )
        self._meta = meta
        self.caller = caller

    # -- plumbing -----------------------------------------------------------------------------

    async def _context(
        self, request: Request, query: PageQuery, error: FormError | None = None, notice: str = ""
    ) -> tuple[PageContext, list[Cookie]]:
        token, cookie = self.guard.issue(request.cookies)
        meta = (await self._meta(EmptyRequest(), self.caller(request))).body
        page = PageContext(
            branding=self.branding,
            query=query,
            csrf_token=token,
            meta=meta,
            error=error,
            notice=notice,
        )
        return page, [] if cookie is None else [cookie]

    async def _show(
        self,
        request: Request,
        template: str,
        query: PageQuery,
        *,
        error: FormError | None = None,
        notice: str = "",
        cookies: Iterable[Cookie] = (),
        **values: Any,
    ) -> Response:
        page, own = await self._context(request, query, error, notice)
        status = 200 if error is None else error.status
        headers = {"Cache-Control": "no-store"}
        if error is not None and error.retry_after:
            headers["Retry-After"] = str(error.retry_after)
        body = render(template, page, **values)
        response = Response(body, status_code=status, media_type=_HTML, headers=headers)
        return with_cookies(response, [*cookies, *own])

    async def _posted(self, request: Request) -> tuple[dict[str, str], PageQuery]:
        form = {k: v for k, v in (await form_values(request)).items() if isinstance(v, str)}
        sources = {name: request.headers.get(name, "") for name in ("origin", "referer")}
        refusal = self.guard.refusal(sources, request.cookies, form)
        if refusal is not None:
            raise _FormRefused(refusal)
        return form, PageQuery.parse(form, HIDDEN_PREFIX)

    async def _signed_in(self, request: Request) -> Mapping[str, Any] | None:
        try:
            return (await self.auth.profile(ProfileRequest(), self.caller(request))).body
        except errors.Unauthenticated:
            return None

    def _next(self, query: PageQuery) -> str:
        """Where a signed-in browser goes from here (the passkey script's target too)."""
        return query.after_login(self.issuer, self.auth.redirect_allowed) or "/app/profile"

    def _forward(self, query: PageQuery) -> Response:
        return redirect(self._next(query))

    async def _refused_redirect(self, request: Request) -> Response:
        return await self._show(
            request,
            "refused.html",
            PageQuery(),
            error=FormError("This sign-in link names a return address that is not allowed."),
            title="Sign-in link not allowed",
            reason="The redirect_uri of this link is not an allowed address, so it is ignored.",
            retry_url="/app",
        )

    async def _message(
        self, request: Request, query: PageQuery, message: str, cookies: Iterable[Cookie] = ()
    ) -> Response:
        return await self._show(
            request,
            "message.html",
            query,
            cookies=cookies,
            title="Check your email" if "email" in message.lower() else "Done",
            message=message,
            next_url=query.url("/app"),
            next_label="Back to sign in",
        )

    # -- login --------------------------------------------------------------------------------

    def _guarded(
        self, view: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            try:
                return await view(request)
            except _FormRefused as refused:
                return await self._show(
                    request,
                    "refused.html",
                    PageQuery(),
                    error=FormError(refused.reason, status=403),
                    title="Form not accepted",
                    reason="For your safety this form was not processed. Reload the page "
                    "and try again.",
                    retry_url="/app",
                )
            except errors.ServerError as error:
                log.exception("login page failed", extra={"error_code": error.code})
                return await self._show(
                    request,
                    "refused.html",
                    PageQuery(),
                    error=FormError("Something went wrong on our side.", status=http_status(error)),
                    title="Something went wrong",
                    reason="Please try again in a moment.",
                    retry_url="/app",
                )

        guarded.__name__ = getattr(view, "__name__", "view")
        return guarded
