"""Rendering an authorize answer through its response mode (reference §5.5).

``query`` and ``fragment`` are 302 redirects; ``form_post`` is a page whose form POSTs
the answer to the client (OAuth 2.0 Form Post Response Mode), submitted by a script and
by a button when scripts are off; ``web_message`` is a page that ``postMessage``s
``{type: "authorization_response", response: {...}}`` to the opener (or parent frame) at
the redirect URI's origin only. Both pages carry their own Content-Security-Policy: a
nonce for their one script, and a form target or frame ancestor limited to the client.
"""

from __future__ import annotations

import html
import json
import secrets
from collections.abc import Sequence
from urllib.parse import urlencode, urlsplit

from starlette.responses import Response

from bastion.core.auth.links import add_query
from bastion.core.oauth.rfc6749_authorize import ResponseMode

__all__ = ["redirect", "render_answer"]

_NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


def redirect(location: str) -> Response:
    return Response(status_code=302, headers={"Location": location, **_NO_STORE})


def _origin(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def _page(body: str, nonce: str, extra_csp: str) -> Response:
    csp = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'none'; "
        f"base-uri 'none'; {extra_csp}"
    )
    document = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>Signing you in</title></head><body>" + body + "</body></html>"
    )
    headers = {**_NO_STORE, "Content-Security-Policy": csp}
    return Response(document, headers=headers, media_type="text/html; charset=utf-8")


def _script_json(value: object) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _form_post(redirect_uri: str, params: Sequence[tuple[str, str]]) -> Response:
    nonce = secrets.token_urlsafe(16)
    fields = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in params
    )
    body = (
        f'<form method="post" action="{html.escape(redirect_uri)}">{fields}'
        "<noscript><p>Scripts are off: continue by pressing the button.</p></noscript>"
        '<button type="submit">Continue</button></form>'
        f'<script nonce="{nonce}">document.forms[0].submit();</script>'
    )
    return _page(body, nonce, f"form-action {_origin(redirect_uri)}; frame-ancestors 'none'")


def _web_message(redirect_uri: str, params: Sequence[tuple[str, str]]) -> Response:
    nonce = secrets.token_urlsafe(16)
    origin = _origin(redirect_uri)
    message = {"type": "authorization_response", "response": dict(params)}
    script = (
        f"(function(){{var m={_script_json(message)};var o={_script_json(origin)};"
        "var t=window.opener||window.parent;if(t&&t!==window){t.postMessage(m,o);}"
        "if(window.opener){window.close();}})();"
    )
    body = f'<p>You can close this window.</p><script nonce="{nonce}">{script}</script>'
    return _page(body, nonce, f"frame-ancestors {origin}")


def render_answer(
    redirect_uri: str, mode: ResponseMode, params: Sequence[tuple[str, str]]
) -> Response:
    if mode is ResponseMode.QUERY:
        return redirect(add_query(redirect_uri, params))
    if mode is ResponseMode.FRAGMENT:
        return redirect(f"{redirect_uri}#{urlencode([(k, v) for k, v in params if v])}")
    if mode is ResponseMode.FORM_POST:
        return _form_post(redirect_uri, params)
    return _web_message(redirect_uri, params)
