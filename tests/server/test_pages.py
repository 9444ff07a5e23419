"""The hosted login pages (``--enable-login-page``) over real HTTP, as a browser uses them.

A client keeps cookies like a browser, sends ``Origin`` like a browser and submits the
forms the pages render (hidden fields included). Four servers on SQLite share one SMTP
sink: ``main`` (email codes as the second factor for users who turn MFA on, one allowed
origin, branding), ``totp`` (authenticator apps), ``links`` (email verification and magic
links on) and ``off`` (``--enable-login-page=false``).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, urlsplit

import httpx
import pyotp
import pytest

from tests.dbfixtures import fresh_sqlite_url
from tests.mailsink import SpooledMailSink
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, free_port, start_server
from tests.server.test_auth_flows import PASSWORD, mail_flags, mails_to, signup

ALLOWED = "https://app.example.com"
ORG = "Acme & Sons"


#: Each server's flags beyond the common ones.
SERVERS = {
    "main": (
        "--enable-mfa",
        "--enable-email-otp",
        "--enforce-mfa=false",
        f"--allowed-origins={ALLOWED}",
        # A listed origin on another site would make the session cookies SameSite=None,
        # hence Secure, which this plain-http test client would not send back.
        "--app-cookie-same-site=lax",
        f"--organization-name={ORG}",
        "--organization-logo=/logo.png",
    ),
    "totp": ("--enable-mfa", "--enable-totp-login", "--enforce-mfa=false"),
    "links": ("--enable-email-verification", "--enable-magic-link-login"),
    "off": ("--enable-login-page=false",),
}


class Site:
    """The servers, each started the first time a test asks for it (a test worker then
    runs only the servers its share of the tests needs)."""

    def __init__(self, tmp: Path, sink: SpooledMailSink) -> None:
        self.tmp = tmp
        self.sink = sink
        self.started: dict[str, ServerProcess] = {}

    def _server(self, name: str) -> ServerProcess:
        if name not in self.started:
            flags = [
                *base_flags("sqlite", fresh_sqlite_url(self.tmp, name)),
                *mail_flags(self.sink),
                "--app-cookie-secure=false",
                *SERVERS[name],
            ]
            self.started[name] = start_server(flags, self.tmp, name=name)
        return self.started[name]

    @property
    def main(self) -> ServerProcess:
        return self._server("main")

    @property
    def totp(self) -> ServerProcess:
        return self._server("totp")

    @property
    def links(self) -> ServerProcess:
        return self._server("links")

    @property
    def off(self) -> ServerProcess:
        return self._server("off")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp: Path = tmp_path_factory.mktemp("pages")
    sink = SpooledMailSink(free_port(), tmp / "mail")
    sink.start()
    site = Site(tmp, sink)
    try:
        yield site
    finally:
        for server in site.started.values():
            server.terminate()
        sink.stop()


# -- a browser, minus the JavaScript it does not need ---------------------------------------


@dataclass
class Form:
    action: str
    fields: dict[str, str] = field(default_factory=dict)


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(a.get("action", "")))
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1].fields[a["name"]] = a.get("value", "")


def forms(response: httpx.Response) -> list[Form]:
    parser = _Forms()
    parser.feed(response.text)
    return parser.forms


def form(response: httpx.Response, action: str) -> Form:
    found = [f for f in forms(response) if f.action == action]
    assert found, f"no form posting to {action} in:\n{response.text}"
    return found[0]


def browser(server: ServerProcess) -> httpx.Client:
    """Keeps cookies; sends ``Origin`` on every request, as a browser does on a form post."""
    return server.client()


def submit(
    client: httpx.Client, page: httpx.Response, action: str, **values: str
) -> httpx.Response:
    """Fill the form posting to ``action`` on ``page`` and send it."""
    data = {**form(page, action).fields, **values}
    return client.post(action, data=data)


def unique_email(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:10]}@example.com"


def mail_link(mail: EmailMessage, path: str) -> str:
    body = mail.get_body(preferencelist=("html", "plain"))
    assert body is not None
    text = body.get_content().replace("&amp;", "&")
    match = re.search(r"https?://[^\s\"'<>]*" + re.escape(path) + r"[^\s\"'<>]*", text)
    assert match is not None, text
    return match.group(0)


def code_in(mail: EmailMessage) -> str:
    body = mail.get_body(preferencelist=("html", "plain"))
    assert body is not None
    match = re.search(r"\b(\d{6})\b", body.get_content())
    assert match is not None
    return match.group(1)


def local(url: str) -> str:
    """The path and query of one of the server's own URLs."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def page_signup(client: httpx.Client, email: str, password: str = PASSWORD) -> httpx.Response:
    page = client.get("/app/signup")
    return submit(
        client, page, "/app/signup", email=email, password=password, confirm_password=password
    )


def page_login(
    client: httpx.Client, email: str, password: str = PASSWORD, query: str = ""
) -> httpx.Response:
    page = client.get(f"/app{query}")
    assert page.status_code == 200, page.text
    return submit(client, page, "/app", identifier=email, password=password)


def meta_refresh_target(response: httpx.Response) -> str:
    match = re.search(r'<meta http-equiv="refresh" content="0; url=([^"]+)">', response.text)
    assert match is not None, response.text
    return match.group(1).replace("&amp;", "&")


# -- pages, branding, headers -----------------------------------------------------------------


def test_login_page_is_plain_branded_html_under_the_default_csp(site: Site) -> None:
    with browser(site.main) as client:
        page = client.get("/app")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-store"
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp
    assert "form-action 'self'" in csp
    html = page.text
    assert '<html lang="en">' in html
    assert "<script" not in html
    assert "style=" not in html
    assert "<style" not in html
    assert "Acme &amp; Sons" in html  # branded and escaped
    assert '<img class="logo" src="/logo.png" alt=""' in html
    assert '<main id="main"' in html
    assert "<h1>Sign in</h1>" in html
    assert '<label for="identifier">' in html
    assert '<label for="password">' in html
    for link in ("/app/signup", "/app/forgot-password"):
        assert f'href="{link}"' in html
    assert "/app/magic-link" not in html  # magic links are off on this server
    # Nothing is loaded from another site.
    assert not re.search(r'(src|href)="(https?:)?//', html)
    css = httpx.get(f"{site.main.url}/app/assets/pages.css")
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")


def test_the_default_logo_from_the_internet_is_not_shown(site: Site) -> None:
    page = httpx.get(f"{site.totp.url}/app")
    assert "<img" not in page.text
    assert "bastion" in page.text  # the default organisation name, as text


def test_pages_are_404_when_the_flag_is_off(site: Site) -> None:
    with browser(site.off) as client:
        for path in ("/app", "/app/signup", "/app/reset-password", "/app/assets/pages.css"):
            assert client.get(path).status_code == 404
        assert client.post("/app", data={}).status_code == 404


# -- signup, the signed-in page, logout, login ------------------------------------------------


def test_signup_signs_in_shows_the_profile_and_logout_ends_the_session(site: Site) -> None:
    email = unique_email("signup")
    with browser(site.main) as client:
        created = page_signup(client, email)
        assert created.status_code == 303, created.text
        assert created.headers["location"] == "/app/profile"
        assert "cookie_session" in client.cookies
        profile = client.get("/app/profile")
        assert profile.status_code == 200
        assert email in profile.text
        # The session is the REST one: the same cookie authenticates /v1/profile.
        assert client.get("/v1/profile").json()["email"] == email
        # Opening /app while signed in goes to the signed-in page.
        assert client.get("/app").headers["location"] == "/app/profile"

        out = submit(client, profile, "/app/logout")
        assert out.status_code == 200
        assert "You have signed out." in out.text
        assert client.get("/v1/profile").status_code == 401
        assert client.get("/app/profile").headers["location"] == "/app"

        back = page_login(client, email)
        assert back.status_code == 303
        assert back.headers["location"] == "/app/profile"
        assert client.get("/v1/profile").json()["email"] == email


def test_signup_errors_are_tied_to_their_fields(site: Site) -> None:
    email = unique_email("dup")
    with browser(site.main) as client:
        page = client.get("/app/signup")
        mismatch = submit(
            client, page, "/app/signup", email=email, password=PASSWORD, confirm_password="x"
        )
        assert mismatch.status_code == 400
        html = mismatch.text
        assert 'role="alert"' in html
        assert "<title>Error: Create an account" in html
        assert re.search(
            r'<input id="confirm_password"[^>]*aria-invalid="true"'
            r'[^>]*aria-describedby="confirm_password-error"',
            html,
        ), html
        assert 'id="confirm_password-error"' in html
        assert f'value="{email}"' in html  # what the user typed is kept
        assert "cookie_session" not in client.cookies

        assert page_signup(client, email).status_code == 303
    with browser(site.main) as other:
        taken = page_signup(other, email)
        assert taken.status_code == 400
        assert "User with given email already exists" in taken.text
        assert re.search(r'<input id="email"[^>]*aria-invalid="true"', taken.text)


def test_a_wrong_password_re_renders_the_form_with_the_error(site: Site) -> None:
    email = unique_email("wrong")
    with browser(site.main) as client:
        assert signup(client, email).status_code == 200
    with browser(site.main) as client:
        refused = page_login(client, email, "not-the-password")
        assert refused.status_code == 401
        assert "Invalid credentials" in refused.text
        assert f'value="{email}"' in refused.text
        assert "cookie_session" not in client.cookies


# -- CSRF ---------------------------------------------------------------------------------------


def test_form_posts_need_our_origin_and_the_token_bound_to_the_cookie(site: Site) -> None:
    email = unique_email("csrf")
    with browser(site.main) as client:
        assert signup(client, email).status_code == 200
    with browser(site.main) as client:
        page = client.get("/app")
        fields = {**form(page, "/app").fields, "identifier": email, "password": PASSWORD}

        for headers in (
            {"origin": "https://evil.example"},
            {"origin": ALLOWED.replace("app.", "evil.")},
        ):
            refused = client.post("/app", data=fields, headers=headers)
            assert refused.status_code == 403, refused.text
            assert "not sent from this site" in refused.text
        # Neither Origin nor Referer.
        bare = httpx.post(
            f"{site.main.url}/app", data=fields, cookies={"app_csrf": client.cookies["app_csrf"]}
        )
        assert bare.status_code == 403

        missing = client.post("/app", data={**fields, "csrf_token": ""})
        assert missing.status_code == 403
        assert "expired" in missing.text
        with browser(site.main) as stranger:
            stranger.get("/app")  # its own cookie: the token above does not match it
            assert stranger.post("/app", data=fields).status_code == 403
        assert "cookie_session" not in client.cookies

        # A Referer from this site stands in for a missing Origin.
        ok = httpx.post(
            f"{site.main.url}/app",
            data=fields,
            cookies={"app_csrf": client.cookies["app_csrf"]},
            headers={"referer": f"{site.main.url}/app"},
        )
        assert ok.status_code == 303, ok.text
        # And so does Origin: the page's own form post.
        assert client.post("/app", data=fields).status_code == 303


# -- where the browser goes after login -------------------------------------------------------


def test_an_open_redirect_is_refused(site: Site) -> None:
    email = unique_email("redirect")
    with browser(site.main) as client:
        assert signup(client, email).status_code == 200
    with browser(site.main) as client:
        refused = client.get("/app", params={"redirect_uri": "https://evil.example/steal"})
        assert refused.status_code == 400
        assert "not allowed" in refused.text
        assert "evil.example" not in refused.text
        # A tampered hidden field is ignored: the login lands on the signed-in page.
        page = client.get("/app")
        data = {
            **form(page, "/app").fields,
            "q.redirect_uri": "https://evil.example/steal",
            "identifier": email,
            "password": PASSWORD,
        }
        landed = client.post("/app", data=data)
        assert landed.status_code == 303
        assert landed.headers["location"] == "/app/profile"


def test_an_allowed_redirect_uri_is_followed_after_login(site: Site) -> None:
    email = unique_email("allowed")
    target = f"{ALLOWED}/callback?x=1"
    with browser(site.main) as client:
        assert signup(client, email).status_code == 200
    with browser(site.main) as client:
        page = client.get("/app", params={"redirect_uri": target})
        assert form(page, "/app").fields["q.redirect_uri"] == target
        assert "redirect_uri=https%3A%2F%2Fapp.example.com" in page.text  # links keep it
        done = submit(client, page, "/app", identifier=email, password=PASSWORD)
        assert done.status_code == 200
        assert "cookie_session" in client.cookies
        # Left by meta refresh, not a redirect: form-action 'self' would block that.
        assert meta_refresh_target(done) == target
        assert f'href="{target.replace("&", "&amp;")}"' in done.text


def test_an_authorize_query_is_kept_through_the_pages_and_sent_back_to_authorize(
    site: Site,
) -> None:
    email = unique_email("oauth")
    query = [
        ("client_id", "test-client"),
        ("redirect_uri", "https://rp.example.org/cb"),  # the client's: /authorize checks it
        ("response_type", "code"),
        ("state", "st-123"),
        ("scope", "openid profile email"),
        ("nonce", "n-1"),
        ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"),
        ("code_challenge_method", "S256"),
    ]
    with browser(site.main) as client:
        page = client.get("/app", params=httpx.QueryParams([*query, ("junk", "dropped")]))
        assert page.status_code == 200
        hidden = form(page, "/app").fields
        assert [(k[2:], v) for k, v in hidden.items() if k.startswith("q.")] == query
        signup_link = re.search(r'href="(/app/signup\?[^"]+)"', page.text)
        assert signup_link is not None
        assert parse_qsl(urlsplit(signup_link.group(1).replace("&amp;", "&")).query) == query

        signup_page = client.get(signup_link.group(1).replace("&amp;", "&"))
        created = submit(
            client,
            signup_page,
            "/app/signup",
            email=email,
            password=PASSWORD,
            confirm_password=PASSWORD,
        )
        assert created.status_code == 200, created.text
        target = meta_refresh_target(created)
        assert target.startswith(f"{site.main.url}/authorize?")
        assert parse_qsl(urlsplit(target).query) == query

        # Signed in already: /app forwards straight back to /authorize ...
        again = client.get("/app", params=httpx.QueryParams([*query]))
        assert again.status_code == 303
        assert parse_qsl(urlsplit(again.headers["location"]).query) == query
        # ... unless the client asked for a fresh login.
        fresh = client.get("/app", params=httpx.QueryParams([*query, ("prompt", "login")]))
        assert fresh.status_code == 200
        assert "<h1>Sign in</h1>" in fresh.text


def test_prompt_login_asks_a_signed_in_user_to_log_in_again_then_gives_the_code(
    site: Site,
) -> None:
    email = unique_email("relogin")
    query = [
        ("client_id", "test-client"),
        ("redirect_uri", f"{ALLOWED}/cb"),
        ("response_type", "code"),
        ("state", "st-relogin"),
        ("code_challenge", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"),
        ("prompt", "login"),
    ]
    with browser(site.main) as client:
        assert page_signup(client, email).status_code == 303
        time.sleep(1.1)  # auth_time has one-second resolution: the demand comes later
        # Signed in, yet /authorize sends the browser to log in again, with its mark ...
        demanded = client.get("/authorize", params=httpx.QueryParams(query))
        assert demanded.status_code in (302, 303), demanded.text
        login_url = urlsplit(demanded.headers["location"])
        assert login_url.path == "/app"
        marked = dict(parse_qsl(login_url.query))
        assert marked["prompt"] == "login"
        assert marked["auth_after"]
        # ... which the page honours even though a session exists ...
        page = client.get(local(demanded.headers["location"]))
        assert page.status_code == 200
        assert "<h1>Sign in</h1>" in page.text
        # ... and the old session, sent back to /authorize with the mark, is still refused.
        stale = client.get("/authorize", params=httpx.QueryParams(list(marked.items())))
        assert urlsplit(stale.headers["location"]).path == "/app"
        # A new login answers it: back at /authorize, the code goes to the client.
        time.sleep(1.1)  # auth_time has one-second resolution; make "after" unambiguous
        done = submit(client, page, "/app", identifier=email, password=PASSWORD)
        target = meta_refresh_target(done)
        assert dict(parse_qsl(urlsplit(target).query))["auth_after"] == marked["auth_after"]
        answer = client.get(local(target))
        assert answer.status_code in (302, 303), answer.text
        redirect_to = urlsplit(answer.headers["location"])
        assert f"{redirect_to.scheme}://{redirect_to.netloc}{redirect_to.path}" == f"{ALLOWED}/cb"
        assert dict(parse_qsl(redirect_to.query)).keys() >= {"code", "state"}


# -- the second factor ------------------------------------------------------------------------


def test_an_email_code_challenge(site: Site) -> None:
    email = unique_email("mfa")
    with browser(site.main) as client:
        assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    with browser(site.main) as client:
        before = len(site.sink.messages())
        challenged = page_login(client, email)
        assert challenged.status_code == 200, challenged.text
        assert "We have emailed you a 6-digit code" in challenged.text
        assert "mfa" in client.cookies
        assert "cookie_session" not in client.cookies
        assert '<label for="otp">' in challenged.text
        code = code_in(mails_to(site.sink, email, 1)[-1])
        assert len(site.sink.messages()) > before

        wrong = submit(client, challenged, "/app/mfa", otp="000000" if code != "000000" else "1")
        assert wrong.status_code == 400
        assert re.search(r'<input id="otp"[^>]*aria-invalid="true"', wrong.text)
        assert "Invalid otp" in wrong.text

        done = submit(client, wrong, "/app/mfa", otp=code)
        assert done.status_code == 303
        assert done.headers["location"] == "/app/profile"
        assert client.get("/v1/profile").json()["email"] == email


def test_start_again_drops_the_parked_login(site: Site) -> None:
    """ "Start again" on the code page is a guarded form that clears the ``mfa`` cookie: a
    sign-in begun after it (a passkey alone, another account) is not taken for the parked
    login's second factor."""
    email = unique_email("restart")
    with browser(site.main) as client:
        assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    with browser(site.main) as client:
        challenged = page_login(client, email)
        assert "mfa" in client.cookies
        forged = client.post("/app/restart", data={}, headers={"origin": "https://evil.example"})
        assert forged.status_code == 403
        assert "mfa" in client.cookies
        restarted = submit(client, challenged, "/app/restart")
        assert restarted.status_code == 200, restarted.text
        assert 'name="password"' in restarted.text
        assert "mfa" not in client.cookies


def test_resending_the_email_code_too_soon_shows_the_services_refusal(site: Site) -> None:
    email = unique_email("resend")
    with browser(site.main) as client:
        assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    with browser(site.main) as client:
        challenged = page_login(client, email)
        mails_to(site.sink, email, 1)
        # The code was mailed a moment ago: the service asks to wait before another.
        resent = submit(client, challenged, "/app/mfa/resend")
        assert resent.status_code == 429, resent.text
        assert int(resent.headers["retry-after"]) > 0
        assert 'role="alert"' in resent.text
        assert "Send a new code" in resent.text  # the code form stays usable


def test_the_code_page_opened_on_its_own_goes_back_to_login(site: Site) -> None:
    with browser(site.main) as client:
        assert client.get("/app/mfa?state=s").headers["location"] == "/app?state=s"


def test_authenticator_enrolment_then_a_recovery_code(site: Site) -> None:
    email = unique_email("totp")
    with browser(site.totp) as client:
        assert signup(client, email, is_multi_factor_auth_enabled=True).status_code == 200
    with browser(site.totp) as client:
        enrol = page_login(client, email)
        assert enrol.status_code == 200, enrol.text
        html = enrol.text
        assert re.search(r'<img class="qr" src="data:image/png;base64,[A-Za-z0-9+/=]+"', html)
        assert 'alt="QR code to add this account to an authenticator app"' in html
        secret = re.search(r'<code class="secret">([A-Z2-7]+)</code>', html)
        assert secret is not None
        codes = re.findall(r"<li><code>([^<]+)</code></li>", html)
        assert codes
        assert "Send a new code" not in html  # authenticator codes are not sent
        done = submit(client, enrol, "/app/mfa", otp=pyotp.TOTP(secret.group(1)).now())
        assert done.status_code == 303, done.text
    with browser(site.totp) as client:
        challenged = page_login(client, email)
        assert "Open your authenticator app" in challenged.text
        assert "<img" not in challenged.text  # enrolled: no QR code again
        done = submit(client, challenged, "/app/mfa", otp=codes[0])
        assert done.status_code == 303, done.text
        assert client.get("/v1/profile").json()["email"] == email


# -- links by email -----------------------------------------------------------------------------


def test_forgot_and_reset_password_by_the_mailed_link(site: Site) -> None:
    email = unique_email("reset")
    new_password = "N3w!password"
    with browser(site.main) as client:
        assert signup(client, email).status_code == 200
    with browser(site.main) as client:
        page = client.get("/app/forgot-password")
        sent = submit(client, page, "/app/forgot-password", email=email)
        assert sent.status_code == 200
        assert "If an account exists for this email" in sent.text
        link = mail_link(mails_to(site.sink, email, 1)[-1], "/app/reset-password")
        assert link.startswith(f"{site.main.url}/app/reset-password?token=")

        reset_page = client.get(local(link))
        assert reset_page.status_code == 200
        token = parse_qs(urlsplit(link).query)["token"][0]
        assert form(reset_page, "/app/reset-password").fields["token"] == token
        mismatch = submit(
            client,
            reset_page,
            "/app/reset-password",
            password=new_password,
            confirm_password="different",
        )
        assert mismatch.status_code == 400
        assert re.search(r'<input id="confirm_password"[^>]*aria-invalid="true"', mismatch.text)
        done = submit(
            client,
            reset_page,
            "/app/reset-password",
            password=new_password,
            confirm_password=new_password,
        )
        assert done.status_code == 200, done.text
        again = submit(
            client,
            reset_page,
            "/app/reset-password",
            password=new_password,
            confirm_password=new_password,
        )
        assert again.status_code == 400  # the link works once
    with browser(site.main) as client:
        assert page_login(client, email).status_code == 401
        assert page_login(client, email, new_password).status_code == 303


def test_a_reset_link_keeps_the_authorize_query(site: Site) -> None:
    email = unique_email("reset-oauth")
    query = "?client_id=test-client&response_type=code&state=abc"
    with browser(site.main) as client:
        assert signup(client, email).status_code == 200
        page = client.get(f"/app/forgot-password{query}")
        assert submit(client, page, "/app/forgot-password", email=email).status_code == 200
    link = mail_link(mails_to(site.sink, email, 1)[-1], "/app/reset-password")
    params = dict(parse_qsl(urlsplit(link).query))
    assert params["state"] == "abc"
    assert params["response_type"] == "code"
    assert params["token"]


def test_a_reset_page_without_a_token_says_so(site: Site) -> None:
    page = httpx.get(f"{site.main.url}/app/reset-password")
    assert page.status_code == 200
    assert "This link is incomplete" in page.text


def test_an_invitation_sets_the_first_password(site: Site) -> None:
    email = unique_email("invited")
    with httpx.Client(base_url=site.main.url, headers={"origin": site.main.url}) as admin:
        invited = admin.post(
            "/v1/admin/invite_members",
            json={"emails": [email], "redirect_uri": f"{ALLOWED}/welcome"},
            headers={"x-service-admin-secret": ADMIN_SECRET},
        )
        assert invited.status_code == 200, invited.text
    link = mail_link(mails_to(site.sink, email, 1)[-1], "/app/setup-password")
    with browser(site.main) as client:
        page = client.get(local(link))
        assert page.status_code == 200
        assert "Choose your password" in page.text
        done = submit(
            client, page, "/app/setup-password", password=PASSWORD, confirm_password=PASSWORD
        )
        assert done.status_code == 200, done.text
        # "Sign in" carries the invitation's redirect, and login then follows it.
        sign_in = re.search(r'href="(/app\?redirect_uri=[^"]+)"', done.text)
        assert sign_in is not None
        login_page = client.get(sign_in.group(1).replace("&amp;", "&"))
        landed = submit(client, login_page, "/app", identifier=email, password=PASSWORD)
        assert meta_refresh_target(landed) == f"{ALLOWED}/welcome"


def test_signup_with_email_verification_asks_to_check_the_inbox(site: Site) -> None:
    email = unique_email("verify")
    with browser(site.links) as client:
        page = client.get("/app/signup?client_id=test-client&response_type=code&state=v1")
        answer = submit(
            client,
            page,
            "/app/signup",
            email=email,
            password=PASSWORD,
            confirm_password=PASSWORD,
        )
        assert answer.status_code == 200
        assert "Verification email has been sent" in answer.text
        assert "cookie_session" not in client.cookies
        # The mailed link comes back to the page with the authorize query, signed in.
        link = mail_link(mails_to(site.sink, email, 1)[-1], "/verify_email")
        landing = client.get(local(link))
        assert landing.status_code == 307
        back = urlsplit(landing.headers["location"])
        assert back.path == "/app"
        forwarded = client.get(f"/app?{back.query}")
        assert forwarded.status_code == 303
        target = urlsplit(forwarded.headers["location"])
        assert target.path == "/authorize"
        assert parse_qsl(target.query) == [
            ("client_id", "test-client"),
            ("response_type", "code"),
            ("state", "v1"),
        ]


def test_a_magic_link_signs_in_through_the_page(site: Site) -> None:
    email = unique_email("magic")
    with browser(site.links) as client:
        start = client.get("/app")
        assert 'href="/app/magic-link"' in start.text
        page = client.get("/app/magic-link")
        sent = submit(client, page, "/app/magic-link", email=email)
        assert sent.status_code == 200
        assert "a magic link has been sent" in sent.text
        link = mail_link(mails_to(site.sink, email, 1)[-1], "/verify_email")
        landing = client.get(local(link))
        assert landing.status_code == 307
        back = urlsplit(landing.headers["location"])
        assert back.path == "/app"
        # The landing page forwards the new session to the signed-in page.
        assert client.get(f"/app?{back.query}").headers["location"] == "/app/profile"
        assert client.get("/v1/profile").json()["email"] == email


def test_a_failed_link_lands_on_login_with_a_fixed_message(site: Site) -> None:
    with browser(site.links) as client:
        params = {"token": "forged", "redirect_uri": f"{site.links.url}/app"}
        landing = client.get("/verify_email", params=params)
        assert landing.status_code == 307
        assert urlsplit(landing.headers["location"]).path == "/app"
        back = client.get(local(landing.headers["location"]))
    assert back.status_code == 200
    assert "That link did not work" in back.text
    injected = httpx.get(f"{site.links.url}/app", params={"error": "Call +1 555 0100 now"})
    assert "That link did not work" in injected.text
    # (the page's random CSRF token may hold any digits: look for the injected words)
    assert "Call +1" not in injected.text
    assert "0100 now" not in injected.text


def test_pages_carry_bastions_name_by_default(site: Site) -> None:
    with browser(site.totp) as client:
        page = client.get("/app")
    assert page.status_code == 200
    assert "<title>Sign in \u2013 bastion</title>" in page.text
    assert "Authorizer" not in page.text
