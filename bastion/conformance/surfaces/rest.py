"""REST under /v1 over httpx, sending Origin as the CSRF rule requires."""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

import httpx

from bastion.conformance.operations import Operation
from bastion.conformance.outcome import Credentials, Outcome, SetCookie, parse_set_cookie
from bastion.conformance.pacing import http_wait
from bastion.conformance.surfaces.base import HTTP_STATUS, Unexpressible, round_robin
from bastion.conformance.surfaces.documented import documented_schemas


def http_headers(origin: str, credentials: Credentials) -> dict[str, str]:
    """``origin``: what a browser on the deployment's own pages sends (its public URL)."""
    headers = {"accept": "application/json"}
    if credentials.origin:
        headers["origin"] = origin
    if credentials.bearer:
        headers["authorization"] = f"Bearer {credentials.bearer}"
    if credentials.cookies:
        headers["cookie"] = "; ".join(f"{k}={v}" for k, v in credentials.cookies)
    if credentials.admin_secret is not None:
        headers["x-service-admin-secret"] = credentials.admin_secret
    return headers


def response_cookies(response: httpx.Response) -> tuple[SetCookie, ...]:
    parsed = (parse_set_cookie(h) for h in response.headers.get_list("set-cookie"))
    return tuple(c for c in parsed if c is not None)


def http_clients(base_urls: Sequence[str], verify: bool | ssl.SSLContext) -> list[httpx.Client]:
    # No cookie jar carries state between calls: every call presents exactly its credentials.
    return [
        httpx.Client(base_url=url.rstrip("/"), timeout=30, verify=verify, follow_redirects=False)
        for url in base_urls
    ]


class RestSurface:
    name = "rest"

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        verify: bool | ssl.SSLContext = True,
        origin: str | None = None,
    ) -> None:
        self._clients = http_clients(base_urls, verify)
        self._origin = origin
        self._next = round_robin(self._clients)
        document = self._clients[0].get("/openapi.json").json()
        self.paths: dict[str, set[str]] = {
            path: {m.upper() for m in item} for path, item in document.get("paths", {}).items()
        }
        self.schemas = documented_schemas(document)

    def offers(self, operation: Operation) -> bool:
        return operation.rest_method in self.paths.get(operation.rest_path, set())

    def call(
        self, operation: Operation, request: dict[str, Any], credentials: Credentials
    ) -> Outcome:
        client = next(self._next)
        client.cookies.clear()
        method = credentials.http_method or operation.rest_method
        headers = http_headers(self._origin or str(client.base_url), credentials)
        if method == "GET":
            if any(isinstance(v, (dict, list)) for v in request.values()):
                raise Unexpressible("a GET route takes flat query parameters only")
            response = client.get(operation.rest_path, params=request, headers=headers)
        else:
            response = client.request(method, operation.rest_path, json=request, headers=headers)
        return self.outcome(operation, response)

    def outcome(self, operation: Operation, response: httpx.Response) -> Outcome:
        cookies = response_cookies(response)
        try:
            body = response.json()
        except ValueError:
            return Outcome(
                ok=False,
                code="unparseable",
                message=f"HTTP {response.status_code}: {response.text[:200]!r}",
                cookies=cookies,
                anomalies=(f"HTTP {response.status_code} with a body that is not JSON",),
            )
        if response.status_code == 200:
            if not isinstance(body, dict):
                return Outcome(ok=False, code="unparseable", message=repr(body)[:200])
            method = response.request.method
            problems = self.schemas.problems(method, operation.rest_path, body)
            return Outcome(ok=True, body=body, cookies=cookies, anomalies=problems)
        code = str(body.get("code", "")) if isinstance(body, dict) else ""
        message = str(body.get("message", "")) if isinstance(body, dict) else ""
        anomalies: tuple[str, ...] = ()
        expected = HTTP_STATUS.get(code)
        if expected is not None and expected != response.status_code:
            anomalies = (f"HTTP {response.status_code} for code {code} (expected {expected})",)
        if response.status_code == 404 and not self.offers(operation):
            return Outcome(ok=False, code=code, message=message, offered=False)
        return Outcome(
            ok=False,
            code=code,
            message=message,
            cookies=cookies,
            anomalies=anomalies,
            retry_safe_after=http_wait(response),
        )

    def close(self) -> None:
        for client in self._clients:
            client.close()
