"""``GET /oauth_login/{provider}`` and ``GET|POST /oauth_callback/{provider}``: browser
redirects, not JSON operations, so they are views of their own (like ``/verify_email``).
Errors before a redirect target is known are the usual JSON errors of the app."""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response

from bastion.service.social.service import Redirect, SocialLogin
from bastion.transports.http.app import CallerOf
from bastion.transports.http.cookies import with_cookies
from bastion.transports.http.dispatch import View
from bastion.transports.http.wire import query_values

__all__ = ["social_views"]


def _redirect(answer: Redirect) -> Response:
    response = Response(
        status_code=302, headers={"Location": answer.location, "Cache-Control": "no-store"}
    )
    return with_cookies(response, answer.cookies)


def social_views(social: SocialLogin, caller_context: CallerOf) -> list[View]:
    async def oauth_login(request: Request) -> Response:
        provider = request.path_params["provider"]
        return _redirect(
            await social.begin(provider, query_values(request), caller_context(request))
        )

    async def oauth_callback(request: Request) -> Response:
        params = query_values(request)
        if request.method == "POST":
            # Apple's response_mode=form_post: the code and state arrive in the body.
            raw = await request.body()
            params.update(parse_qsl(raw.decode("utf-8", "replace")))
        provider = request.path_params["provider"]
        return _redirect(await social.finish(provider, params, caller_context(request)))

    return [
        View("/oauth_login/{provider}", ("GET",), oauth_login),
        View("/oauth_callback/{provider}", ("GET", "POST"), oauth_callback),
    ]
