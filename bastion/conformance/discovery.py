"""What the deployment under test has enabled, from /v1/meta and /v1/admin/meta.

Read over REST before any scenario runs. The admin secret is tried as the header first;
a deployment started with ``--disable-admin-header-auth`` refuses it, and the suite
then logs in once and uses the admin cookie instead.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any

import httpx

from bastion.conformance.outcome import Credentials, parse_set_cookie
from bastion.conformance.pacing import Pacer, http_wait

ADMIN_COOKIE = "service-admin"


@dataclass
class Deployment:
    base_url: str
    #: None: admin rows skip by name (``NO_ADMIN``); the engine's state is then unknown.
    admin_secret: str | None
    client_id: str
    client_secret: str | None
    meta: dict[str, Any] = field(default_factory=dict)
    admin_meta: dict[str, Any] = field(default_factory=dict)
    admin_credentials: Credentials = field(default_factory=Credentials)
    header_auth: bool = True
    #: None: not known (no admin secret to read the model with).
    fga_enabled: bool | None = False
    fga_tuples_present: bool = False
    destructive: bool = False
    #: Host the deployment reaches the suite's own webhook receiver at.
    receiver_host: str = "127.0.0.1"
    #: Shared by every call of the run: rate ceiling and throttle waits.
    pacer: Pacer = field(default_factory=Pacer)
    #: Every instance given with --base-url (calls alternate between them).
    base_urls: list[str] = field(default_factory=list)
    #: The deployment's public URL (its tokens' issuer): the Origin browsers send.
    public_url: str = ""
    #: TLS verification for raw HTTP rows (True, False, or an SSL context trusting --tls-ca).
    verify: bool | ssl.SSLContext = True

    def flag(self, name: str) -> bool:
        return bool(self.meta.get(name))

    def needs_flag(self, name: str) -> str | None:
        return None if self.flag(name) else f"{name} is off on this deployment"


#: Every user the suite signs up has an address at this domain (``Ctx.email``): the
#: marker an operator filters on, and how --destructive tells the suite's users apart.
SUITE_DOMAIN = "conformance.example.com"


def foreign_users(deployment: Deployment, *, page_size: int = 100) -> list[str]:
    """Up to one page of users the suite did not create (their address or id), by
    listing the deployment's users as the admin; empty when it holds only the suite's."""
    found: list[str] = []
    with httpx.Client(
        base_url=deployment.base_url,
        headers={"origin": deployment.public_url or deployment.base_url},
        timeout=30,
        verify=deployment.verify,
    ) as client:
        http = _Paced(client, deployment.pacer)
        page = 1
        while not found:
            listing = http.post(
                "/v1/admin/users",
                json={"pagination": {"page": page, "limit": page_size}},
                headers=_headers(deployment.admin_credentials),
            )
            if listing.status_code != 200:
                raise DiscoveryError(
                    f"cannot list the deployment's users (POST /v1/admin/users: "
                    f"{listing.status_code} {listing.text[:200]})"
                )
            users = listing.json().get("users") or []
            found = [
                str(user.get("email") or user.get("id"))
                for user in users
                if not str(user.get("email") or "").endswith("@" + SUITE_DOMAIN)
            ]
            if len(users) < page_size:
                break
            page += 1
    return found


#: Why a row that needs the admin skips when the run has no admin secret.
NO_ADMIN = "needs --admin-secret: admin operations"


class DiscoveryError(Exception):
    pass


def discover(
    base_url: str,
    *,
    admin_secret: str | None,
    client_id: str,
    client_secret: str | None,
    verify: bool | ssl.SSLContext = True,
    pacer: Pacer | None = None,
) -> Deployment:
    deployment = Deployment(base_url.rstrip("/"), admin_secret, client_id, client_secret)
    deployment.verify = verify
    deployment.pacer = pacer or Pacer()
    with httpx.Client(
        base_url=deployment.base_url,
        headers={"origin": deployment.base_url},
        timeout=30,
        verify=verify,
    ) as client:
        http = _Paced(client, deployment.pacer)
        meta = http.get("/v1/meta")
        if meta.status_code != 200:
            raise DiscoveryError(f"GET /v1/meta answered {meta.status_code}: {meta.text[:200]}")
        deployment.meta = meta.json()
        openid = http.get("/.well-known/openid-configuration")
        issuer = openid.json().get("issuer") if openid.status_code == 200 else None
        deployment.public_url = str(issuer or deployment.base_url).rstrip("/")
        http.headers["origin"] = deployment.public_url
        if admin_secret is None:
            deployment.fga_enabled = None
            return deployment
        header = {"x-service-admin-secret": admin_secret}
        admin_meta = http.get("/v1/admin/meta", headers=header)
        if admin_meta.status_code == 200:
            deployment.admin_credentials = Credentials(admin_secret=admin_secret)
        else:
            deployment.header_auth = False
            login = http.post("/v1/admin/login", json={"admin_secret": admin_secret})
            cookies = [parse_set_cookie(h) for h in login.headers.get_list("set-cookie")]
            cookie = next((c for c in cookies if c and c.name == ADMIN_COOKIE), None)
            if login.status_code != 200 or cookie is None:
                raise DiscoveryError(
                    f"the admin secret is refused (POST /v1/admin/login: {login.status_code})"
                )
            deployment.admin_credentials = Credentials(cookies=((ADMIN_COOKIE, cookie.value),))
            admin_meta = http.get(
                "/v1/admin/meta", headers={"cookie": f"{ADMIN_COOKIE}={cookie.value}"}
            )
        deployment.admin_meta = admin_meta.json() if admin_meta.status_code == 200 else {}
        admin_headers = _headers(deployment.admin_credentials)
        model = http.get("/v1/admin/fga/model", headers=admin_headers)
        deployment.fga_enabled = model.status_code == 200
        if deployment.fga_enabled:
            read = http.post(
                "/v1/admin/fga/tuples/read", json={"page_size": 1}, headers=admin_headers
            )
            deployment.fga_tuples_present = bool(
                read.status_code == 200 and read.json().get("tuples")
            )
    return deployment


class _Paced:
    """The discovery client, waiting out throttles the deployment marks as harmless."""

    def __init__(self, client: httpx.Client, pacer: Pacer) -> None:
        self.client, self.pacer, self.headers = client, pacer, client.headers

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.pacer.send_raw(lambda: self.client.get(url, **kwargs), http_wait)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.pacer.send_raw(lambda: self.client.post(url, **kwargs), http_wait)


def _headers(credentials: Credentials) -> dict[str, str]:
    if credentials.admin_secret is not None:
        return {"x-service-admin-secret": credentials.admin_secret}
    return {"cookie": "; ".join(f"{k}={v}" for k, v in credentials.cookies)}
