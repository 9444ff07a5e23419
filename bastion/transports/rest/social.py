"""``GET /oauth_login/<provider>`` and ``GET|POST /oauth_callback/<provider>``: browser
redirects, not JSON operations, so they are views of their own (like ``/verify_email``).
Errors before a redirect target is known are the usual JSON errors of the app."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qsl

from quart import Response, request
from quart_trio import QuartTrio

from bastion.service.context import CallerContext
from bastion.service.social.service import Redirect, SocialLogin
from bastion.transports.http.cookies import with_cookies

__all__ = ["register_social_views"]


def _redirect(answer: Redirect) -> Response:
    response = Response("", status=302, headers={"Location": answer.location})
    response.headers["Cache-Control"] = "no-store"
    return with_cookies(response, answer.cookies)


def register_social_views(
    app: QuartTrio, social: SocialLogin, caller_context: Callable[[], CallerContext]
) -> None:
    async def oauth_login(provider: str) -> Response:
        return _redirect(await social.begin(provider, dict(request.args), caller_context()))

    async def oauth_callback(provider: str) -> Response:
        params = dict(request.args)
        if request.method == "POST":
            # Apple's response_mode=form_post: the code and state arrive in the body.
            raw = await request.get_data(cache=False)
            text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            params.update(parse_qsl(text))
        return _redirect(await social.finish(provider, params, caller_context()))

    app.add_url_rule(
        "/oauth_login/<provider>",
        endpoint="GET /oauth_login",
        view_func=oauth_login,
        methods=["GET"],
    )
    app.add_url_rule(
        "/oauth_callback/<provider>",
        endpoint="GET|POST /oauth_callback",
        view_func=oauth_callback,
        methods=["GET", "POST"],
    )
