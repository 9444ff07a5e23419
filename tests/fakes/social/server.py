"""A local identity provider speaking one real provider's dialect (:mod:`.dialects`).

It checks what the provider checks (client id, redirect URI, PKCE, client
authentication, single-use codes, Apple's ES256 client secret) and answers as the
provider documents: a redirect (or Apple's auto-posting form) with ``code`` and
``state``, token JSON with an ID token signed by keys it publishes at the provider's
JWKS path, and the provider's own profile shapes. ``person`` is who "signs in"; tests
change it, or set ``token_error`` / ``deny`` to make the provider refuse.

    with FakeProvider("github") as fake:
        flags = [*fake.flags(), f"--social-provider-urls={fake.provider_url()}"]
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import json
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet, RSAKey

from tests.fakes.social.dialects import DIALECTS, Dialect

__all__ = ["CONSUMER_TENANT", "FakeProvider", "Person"]

CONSUMER_TENANT = "9188040d-6c67-4c5b-b112-36a304b66dad"


@dataclasses.dataclass
class Person:
    sub: str = "10001"
    email: str | None = "ann@example.com"
    email_verified: bool = True
    given_name: str = "Ann"
    family_name: str = "Example"
    username: str = "ann"
    picture: str = "https://images.example.com/ann.png"
    #: Microsoft: the user's tenant (personal accounts: the consumer tenant)
    tenant: str = CONSUMER_TENANT
    #: Microsoft: the optional "email domain owner verified" claim
    xms_edov: bool = False


@dataclasses.dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    form: dict[str, str]
    headers: dict[str, str]


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _route(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.escape(template).replace(r"\{tenant\}", "[^/]+") + "$")


class FakeProvider:
    def __init__(
        self,
        name: str,
        *,
        client_id: str = "social-client-id",
        client_secret: str = "social-client-secret",
    ) -> None:
        self.dialect: Dialect = DIALECTS[name]
        self.client_id = client_id
        self.client_secret = client_secret
        self.person = Person()
        #: the next token requests answer this OAuth error (``None``: succeed)
        self.token_error: str | None = None
        #: the person declines at the authorize step
        self.deny = False
        #: claims to overwrite in the next ID tokens (a wrong issuer, audience, nonce ...)
        self.id_token_changes: dict[str, Any] = {}
        #: sign ID tokens with a key that is not published (same ``kid``): a forgery
        self.forge_id_tokens = False
        self.seen: list[Seen] = []
        self._codes: dict[str, dict[str, Any]] = {}
        self._access: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._rsa = RSAKey.generate_key(2048, parameters={"kid": "fake-rsa"}, private=True)
        self._ec = ECKey.generate_key("P-256", parameters={"kid": "fake-ec"}, private=True)
        #: Apple: the developer account's signing key, team and key id
        self.apple_key = ECKey.generate_key("P-256", private=True)
        self.apple_team, self.apple_key_id = "TEAM123456", "KEY1234567"
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET", {})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode()
                fake._handle(self, "POST", dict(parse_qsl(body)))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread: threading.Thread | None = None

    # -- lifecycle and configuration ------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProvider:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def secret_flag(self) -> str:
        """What ``--<provider>-client-secret`` is set to (Apple: team:key:PEM)."""
        if self.dialect.name != "apple":
            return self.client_secret
        pem = self.apple_key.as_pem(private=True).decode().strip().replace("\n", "\\n")
        return f"{self.apple_team}:{self.apple_key_id}:{pem}"

    def flags(self) -> list[str]:
        name = self.dialect.name
        return [
            f"--{name}-client-id={self.client_id}",
            f"--{name}-client-secret={self.secret_flag()}",
        ]

    def provider_url(self) -> str:
        """One ``--social-provider-urls`` item."""
        return f"{self.dialect.name}={self.url}"

    def requests_to(self, path: str) -> list[Seen]:
        return [s for s in self.seen if s.path == path]

    # -- dispatch ---------------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, method: str, form: dict[str, str]) -> None:
        parts = urlsplit(h.path)
        path, query = unquote(parts.path), dict(parse_qsl(parts.query))
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.seen.append(Seen(method, path, query, form, headers))
        d = self.dialect
        routes: list[tuple[str | None, str, Any]] = [
            (d.authorize, "GET", self._authorize),
            (d.token, "GET" if d.client_auth == "get" else "POST", self._token),
            (d.jwks, "GET", self._jwks),
            (d.profile, "GET", self._profile),
            (d.emails, "GET", self._emails),
        ]
        for template, wanted, action in routes:
            if template is not None and _route(template).match(path):
                if method != wanted:
                    return self._send(h, 405, {"error": "method_not_allowed"})
                status, body, extra = action(query if method == "GET" else form, headers, path)
                return self._send(h, status, body, extra)
        self._send(h, 404, {"error": "not_found"})

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None
    ) -> None:
        headers = dict(headers or {})
        if isinstance(body, bytes):
            raw = body
        else:
            raw = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    # -- authorize --------------------------------------------------------------------------

    def _authorize(self, q: dict[str, str], _h: dict[str, str], path: str) -> tuple[int, Any, Any]:
        d = self.dialect
        problems = []
        if q.get("client_id") != self.client_id:
            problems.append("unknown client_id")
        if q.get("response_type") != "code":
            problems.append("response_type must be code")
        for required in ("redirect_uri", "state", "scope"):
            if not q.get(required):
                problems.append(f"{required} is required")
        challenge, method = q.get("code_challenge"), q.get("code_challenge_method")
        if d.pkce == "required" and not challenge:
            problems.append("code_challenge is required")
        if challenge and (d.pkce == "none" or method != "S256"):
            problems.append("unsupported code_challenge")
        if d.form_post and q.get("response_mode") != "form_post":
            problems.append("response_mode must be form_post when scopes are requested")
        if problems:
            return 400, {"error": "invalid_request", "error_description": "; ".join(problems)}, {}
        redirect, state = q["redirect_uri"], q["state"]
        if self.deny:
            location = f"{redirect}?{urlencode({'error': 'access_denied', 'state': state})}"
            return 302, b"", {"Location": location}
        code = secrets.token_urlsafe(16)
        with self._lock:
            self._codes[code] = {
                "redirect_uri": redirect,
                "challenge": challenge,
                "nonce": q.get("nonce"),
                "scope": q["scope"].replace(",", " ").split(),
                "claims": q.get("claims", ""),
            }
        if d.form_post:
            user = {
                "name": {"firstName": self.person.given_name, "lastName": self.person.family_name},
                "email": self.person.email,
            }
            fields = {"code": code, "state": state, "user": json.dumps(user)}
            inputs = "".join(
                f'<input type="hidden" name="{k}" value="{html.escape(v)}">'
                for k, v in fields.items()
            )
            page = (
                f'<html><body onload="document.forms[0].submit()"><form method="post" '
                f'action="{html.escape(redirect)}">{inputs}</form></body></html>'
            )
            return 200, page.encode(), {"Content-Type": "text/html"}
        location = f"{redirect}?{urlencode({'code': code, 'state': state})}"
        return 302, b"", {"Location": location}

    # -- token ------------------------------------------------------------------------------

    def _client_ok(self, f: dict[str, str], headers: dict[str, str]) -> bool:
        d = self.dialect
        if d.client_auth == "basic":
            value = headers.get("authorization", "")
            if not value.startswith("Basic "):
                return False
            pair = base64.b64decode(value[6:]).decode()
            user, _, password = pair.partition(":")
            return unquote(user) == self.client_id and unquote(password) == self.client_secret
        if f.get("client_id") != self.client_id:
            return False
        if d.name == "apple":
            return self._apple_secret_ok(f.get("client_secret", ""))
        return f.get("client_secret") == self.client_secret

    def _apple_secret_ok(self, secret: str) -> bool:
        """Apple's rules: ES256, ``kid`` = key id, ``iss`` = team, ``sub`` = client id,
        ``aud`` = Apple, not expired, at most six months long."""
        try:
            token = jwt.decode(secret, self.apple_key, algorithms=["ES256"])
        except (JoseError, ValueError):
            return False
        c, now = token.claims, time.time()
        return (
            token.header.get("kid") == self.apple_key_id
            and c.get("iss") == self.apple_team
            and c.get("sub") == self.client_id
            and c.get("aud") == self.url
            and c.get("exp", 0) > now
            and c.get("exp", 0) - c.get("iat", 0) <= 15_777_000
        )

    def _token(self, f: dict[str, str], headers: dict[str, str], path: str) -> tuple[int, Any, Any]:
        d = self.dialect
        if d.client_auth != "get" and f.get("grant_type") != "authorization_code":
            return 400, {"error": "unsupported_grant_type"}, {}
        if not self._client_ok(f, headers):
            return 401, {"error": "invalid_client"}, {}
        if self.token_error:
            return 400, {"error": self.token_error, "error_description": "refused"}, {}
        with self._lock:
            grant = self._codes.pop(f.get("code", ""), None)
        if grant is None or grant["redirect_uri"] != f.get("redirect_uri"):
            return 400, {"error": "invalid_grant"}, {}
        verifier = f.get("code_verifier")
        if grant["challenge"] and (not verifier or _s256(verifier) != grant["challenge"]):
            return 400, {"error": "invalid_grant", "error_description": "PKCE failed"}, {}
        access = secrets.token_urlsafe(24)
        with self._lock:
            self._access[access] = grant
        body: dict[str, Any] = {
            "access_token": access,
            "token_type": "bearer" if d.name == "github" else "Bearer",
            "expires_in": 3600,
            "scope": " ".join(grant["scope"]),
        }
        if d.jwks is not None:
            body["id_token"] = self._id_token(grant)
        if d.json_only_when_asked and "json" not in headers.get("accept", ""):
            return (
                200,
                urlencode(body).encode(),
                {"Content-Type": "application/x-www-form-urlencoded"},
            )
        return 200, body, {}

    def _id_token(self, grant: dict[str, Any]) -> str:
        d, p, now = self.dialect, self.person, int(time.time())
        issuer = self.url + (d.issuer_path or "").replace("{tid}", p.tenant)
        claims: dict[str, Any] = {
            "iss": issuer,
            "aud": self.client_id,
            "sub": p.sub,
            "iat": now,
            "exp": now + 3600,
        }
        if grant["nonce"]:
            claims["nonce"] = grant["nonce"]
        wants_email = True
        if d.name == "twitch":
            wants_email = '"email"' in grant["claims"]
        if d.name == "roblox":
            wants_email = "email" in grant["scope"]
            claims.update(name=p.given_name, nickname=p.username, preferred_username=p.username)
        if d.name == "google":
            claims.update(given_name=p.given_name, family_name=p.family_name, picture=p.picture)
        if d.name == "microsoft":
            claims.update(
                name=f"{p.given_name} {p.family_name}", preferred_username=p.email, tid=p.tenant
            )
            if p.xms_edov:
                claims["xms_edov"] = True
        if wants_email and p.email is not None:
            claims["email"] = p.email
            if d.name == "apple":
                claims["email_verified"] = "true" if p.email_verified else "false"
            elif d.name != "microsoft":
                claims["email_verified"] = p.email_verified
        claims.update(self.id_token_changes)
        key = self._ec if d.id_token_alg == "ES256" else self._rsa
        header = {"alg": d.id_token_alg, "kid": key.kid}
        if self.forge_id_tokens:
            key = (
                ECKey.generate_key("P-256", private=True)
                if d.id_token_alg == "ES256"
                else RSAKey.generate_key(2048, private=True)
            )
        return jwt.encode(header, claims, key, algorithms=[d.id_token_alg])

    def _jwks(self, _q: dict[str, str], _h: dict[str, str], path: str) -> tuple[int, Any, Any]:
        key = self._ec if self.dialect.id_token_alg == "ES256" else self._rsa
        return 200, KeySet([key]).as_dict(private=False), {}

    # -- profile APIs -----------------------------------------------------------------------

    def _bearer(self, headers: dict[str, str]) -> dict[str, Any] | None:
        value = headers.get("authorization", "")
        if not value.lower().startswith("bearer "):
            return None
        with self._lock:
            return self._access.get(value[7:])

    def _profile(
        self, q: dict[str, str], headers: dict[str, str], path: str
    ) -> tuple[int, Any, Any]:
        grant = self._bearer(headers)
        if grant is None:
            return 401, {"message": "Bad credentials"}, {}
        p, name = self.person, self.dialect.name
        if name == "github":
            body: Any = {
                "id": int(p.sub),
                "login": p.username,
                "name": f"{p.given_name} {p.family_name}",
                "avatar_url": p.picture,
                "email": None,
            }
        elif name == "facebook":
            everything = {
                "id": p.sub,
                "first_name": p.given_name,
                "last_name": p.family_name,
                "picture": {"data": {"url": p.picture}},
            }
            if p.email is not None and p.email_verified:
                everything["email"] = p.email
            wanted = q.get("fields", "id").split(",")
            body = {k: v for k, v in everything.items() if k in wanted}
        elif name == "discord":
            body = {
                "id": p.sub,
                "username": p.username,
                "global_name": p.given_name,
                "avatar": "a1b2c3",
                "email": p.email,
                "verified": p.email_verified,
            }
        elif name == "twitter":
            data = {
                "id": p.sub,
                "name": f"{p.given_name} {p.family_name}",
                "username": p.username,
                "profile_image_url": p.picture,
            }
            fields = q.get("user.fields", "").split(",")
            if "confirmed_email" in fields and "users.email" in grant["scope"] and p.email_verified:
                data["confirmed_email"] = p.email
            body = {"data": data}
        else:  # linkedin userinfo
            body = {
                "sub": p.sub,
                "name": f"{p.given_name} {p.family_name}",
                "given_name": p.given_name,
                "family_name": p.family_name,
                "picture": p.picture,
                "locale": {"country": "US", "language": "en"},
                "email": p.email,
                "email_verified": p.email_verified,
            }
        return 200, body, {}

    def _emails(
        self, _q: dict[str, str], headers: dict[str, str], path: str
    ) -> tuple[int, Any, Any]:
        if self._bearer(headers) is None:
            return 401, {"message": "Bad credentials"}, {}
        p = self.person
        emails = [
            {"email": "old@example.org", "primary": False, "verified": True, "visibility": None}
        ]
        if p.email is not None:
            emails.append(
                {
                    "email": p.email,
                    "primary": True,
                    "verified": p.email_verified,
                    "visibility": "private",
                }
            )
        return 200, emails, {}
