"""Raw HTTP for the rows that exist only on the web: the OAuth/OIDC provider and the
hosted login pages. A :class:`Browser` is one user agent on one instance: it keeps its
own cookies, sends the deployment's public origin as a browser on its pages would, and
follows the deployment's absolute links (which name the public URL) on that instance.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from bastion.conformance.discovery import Deployment
from bastion.conformance.outcome import parse_set_cookie
from bastion.conformance.pacing import http_wait

_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
_REFRESH = re.compile(r'<meta http-equiv="refresh" content="0; url=([^"]+)">')


class Browser:
    def __init__(self, deployment: Deployment, base_url: str) -> None:
        self.deployment = deployment
        self.public = deployment.public_url
        self.cookies: dict[str, str] = {}
        self._http = httpx.Client(
            base_url=base_url, timeout=30, verify=deployment.verify, follow_redirects=False
        )

    def close(self) -> None:
        self._http.close()

    def local(self, url: str) -> str:
        """A link the deployment gave (on its public URL) as a path on this instance."""
        if url.startswith(self.public):
            return url[len(self.public) :] or "/"
        return url

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        send_cookies: bool = True,
        **kwargs: Any,
    ) -> httpx.Response:
        sent = {"origin": self.public, **(headers or {})}
        if send_cookies and self.cookies:
            sent["cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())

        def attempt() -> httpx.Response:
            return self._http.request(method, self.local(url), headers=sent, **kwargs)

        response = self.deployment.pacer.send_raw(attempt, http_wait)
        for header in response.headers.get_list("set-cookie"):
            cookie = parse_set_cookie(header)
            if cookie is None:
                continue
            if cookie.cleared:
                self.cookies.pop(cookie.name, None)
            else:
                self.cookies[cookie.name] = cookie.value
        return response

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)


def redirect_target(response: httpx.Response) -> tuple[str, dict[str, str]]:
    """(URL without query, query parameters) of a 302/303; raises ValueError otherwise."""
    if response.status_code not in (302, 303):
        raise ValueError(f"expected a redirect, got HTTP {response.status_code}")
    parts = urlsplit(response.headers["location"])
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.netloc else parts.path, query


def hidden_fields(page: str) -> dict[str, str]:
    """The hidden inputs of a hosted page's form (its CSRF token and carried query)."""
    return {name: html.unescape(value) for name, value in _HIDDEN.findall(page)}


def continue_link(page: str) -> str | None:
    """Where a "Signed in" page sends the browser next."""
    match = _REFRESH.search(page)
    return html.unescape(match.group(1)) if match else None


def pkce_pair() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge), RFC 7636."""
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
