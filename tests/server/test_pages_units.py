"""The login pages' own decisions, without a server: the kept query, the CSRF guard, the
social buttons and how errors are tied to inputs in the rendered HTML."""

from __future__ import annotations

import itertools
import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from bastion.transports.pages.csrf import CSRF_COOKIE, CSRF_FIELD, FormGuard
from bastion.transports.pages.query import MAX_VALUE_LENGTH, PageQuery
from bastion.transports.pages.render import (
    Branding,
    FormError,
    PageContext,
    field_for,
    render,
    social_links,
    when,
)
from bastion.transports.pages.results import MFA_TEXT, challenge_method

ISSUER = "https://id.example.com"


def allowed(uri: str) -> bool:
    return uri.startswith(("https://id.example.com/", "https://app.example.com/"))


# -- the kept query ---------------------------------------------------------------------------


def test_parse_keeps_known_parameters_in_a_fixed_order_and_drops_the_rest() -> None:
    query = PageQuery.parse(
        {"state": "s", "junk": "x", "client_id": "c", "scope": "", "nonce": "n" * 5000}
    )
    assert query.params == (("client_id", "c"), ("state", "s"))
    assert len("n" * 5000) > MAX_VALUE_LENGTH
    assert PageQuery.parse({"q.state": "s", "state": "ignored"}, "q.").params == (("state", "s"),)


@pytest.mark.parametrize(
    ("params", "authorize"),
    [
        ({"response_type": "code", "state": "s"}, True),
        ({"client_id": "c", "state": "s"}, True),
        ({"client_id": "c"}, False),
        ({"state": "s", "redirect_uri": "https://app.example.com/x"}, False),
        ({}, False),
    ],
)
def test_what_counts_as_an_authorize_request(params: dict[str, str], authorize: bool) -> None:
    assert PageQuery.parse(params).is_authorize is authorize


def test_after_login_goes_back_to_authorize_with_the_same_query() -> None:
    query = PageQuery.parse(
        {"client_id": "c", "state": "s t", "redirect_uri": "https://rp.example.org/cb"}
    )
    target = query.after_login(ISSUER, allowed)
    assert target is not None
    assert target.startswith(f"{ISSUER}/authorize?")
    assert parse_qsl(urlsplit(target).query) == list(query.params)
    # The client's redirect_uri is /authorize's to check, not the page's.
    assert not query.refused_redirect(allowed)


def test_after_login_follows_only_an_allowed_redirect_uri() -> None:
    good = PageQuery.parse({"redirect_uri": "https://app.example.com/home"})
    assert good.after_login(ISSUER, allowed) == "https://app.example.com/home"
    assert not good.refused_redirect(allowed)
    evil = PageQuery.parse({"redirect_uri": "https://evil.example/"})
    assert evil.after_login(ISSUER, allowed) is None
    assert evil.refused_redirect(allowed)
    assert PageQuery().after_login(ISSUER, allowed) is None


def test_asks_login() -> None:
    then = 1_700_000_000
    assert PageQuery.parse({"prompt": "consent login"}).asks_login(then)
    assert PageQuery.parse({"max_age": "0"}).asks_login(then)
    assert not PageQuery.parse({"prompt": "consent", "max_age": "60"}).asks_login(then)
    # /authorize's mark decides: a login after it is enough, one in its second is not.
    marked = PageQuery.parse({"prompt": "login", "auth_after": f"{then}.{'a' * 32}"})
    assert marked.asks_login(then)
    assert not marked.asks_login(then + 1)
    assert dict(marked.params)["auth_after"] == f"{then}.{'a' * 32}"  # kept for /authorize


def test_urls_and_hidden_fields() -> None:
    query = PageQuery.parse({"state": "a&b", "client_id": "c"})
    assert query.url("/app/signup") == "/app/signup?client_id=c&state=a%26b"
    assert PageQuery().url("/app") == "/app"
    assert query.hidden_fields() == (("q.client_id", "c"), ("q.state", "a&b"))


# -- the CSRF guard ---------------------------------------------------------------------------


def guard(secret: str = "client-secret") -> FormGuard:
    return FormGuard(secret, secure=True, origin_allowed=lambda o: o == "https://id.example.com")


def test_issue_sets_a_cookie_once_and_derives_the_token_from_it() -> None:
    token, cookie = guard().issue({})
    assert cookie is not None
    assert cookie.name == CSRF_COOKIE
    assert cookie.path == "/app"
    assert cookie.same_site == "Strict"
    assert cookie.http_only
    assert cookie.secure
    again, none = guard().issue({CSRF_COOKIE: cookie.value})
    assert none is None
    assert again == token != cookie.value
    _, replaced = guard().issue({CSRF_COOKIE: "not-hex"})
    assert replaced is not None


def test_refusal_needs_our_origin_and_the_matching_token() -> None:
    token, cookie = guard().issue({})
    assert cookie is not None
    cookies = {CSRF_COOKIE: cookie.value}
    form = {CSRF_FIELD: token}
    ours = {"origin": "https://id.example.com"}
    assert guard().refusal(ours, cookies, form) is None
    assert guard().refusal({"referer": "https://id.example.com/app?x=1"}, cookies, form) is None
    assert guard().refusal({}, cookies, form) is not None
    assert guard().refusal({"origin": "https://evil.example"}, cookies, form) is not None
    assert guard().refusal({"origin": "null"}, cookies, form) is not None
    assert guard().refusal(ours, {}, form) is not None
    assert guard().refusal(ours, cookies, {}) is not None
    altered = token[:-1] + ("1" if token[-1] == "0" else "0")
    assert guard().refusal(ours, cookies, {CSRF_FIELD: altered}) is not None
    # A token made under another key (a planted cookie and a guessed token) fails.
    other_token, _ = guard("another-secret").issue(cookies)
    assert guard().refusal(ours, cookies, {CSRF_FIELD: other_token}) is not None


# -- errors tied to inputs ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "fields", "expected"),
    [
        ("passwords don't match", ("password", "confirm_password"), "confirm_password"),
        ("password must be of minimum 6 characters", ("email", "password"), "password"),
        ("invalid otp", ("otp",), "otp"),
        ("invalid email address", ("email",), "email"),
        ("invalid email address", ("identifier", "password"), "identifier"),
        ("invalid credentials", ("identifier", "password"), None),
        ("email or phone number is required", ("identifier",), "identifier"),
    ],
)
def test_field_for(message: str, fields: tuple[str, ...], expected: str | None) -> None:
    assert field_for(message, fields) == expected


def page(**changes: object) -> PageContext:
    values: dict[str, object] = {
        "branding": Branding("Org <b>", ""),
        "query": PageQuery.parse({"state": "s", "client_id": "c"}),
        "csrf_token": "tok",
        "meta": {},
    }
    values.update(changes)
    return PageContext(**values)  # type: ignore[arg-type]


def test_a_field_error_is_described_by_its_hint_and_its_message() -> None:
    html = render(
        "signup.html",
        page(error=FormError("password is too short", "password")),
        title="Create an account",
        values={"email": "a@b.c", "given_name": "", "family_name": ""},
        password_hint="Between 6 and 36 characters.",
        social=[],
    )
    field = re.search(r'<input id="password"[^>]*>', html)
    assert field is not None
    assert 'aria-invalid="true"' in field.group(0)
    assert 'aria-describedby="password-hint password-error"' in field.group(0)
    assert "autofocus" in field.group(0)
    assert '<p class="field-error" id="password-error">' in html
    assert '<a href="#password">password is too short</a>' in html
    assert "Org &lt;b&gt;" in html
    assert '<input type="hidden" name="q.client_id" value="c">' in html
    assert '<input type="hidden" name="csrf_token" value="tok">' in html
    # Only the failing input takes the focus.
    assert html.count("autofocus") == 1


def test_social_buttons_are_the_providers_meta_enables() -> None:
    states = (f"state-{n}" for n in itertools.count())
    meta = {"is_github_login_enabled": True, "is_apple_login_enabled": True}
    query = PageQuery.parse({"client_id": "c", "state": "s"})
    links = social_links(ISSUER, query, meta, lambda: next(states))
    assert [label for label, _ in links] == ["GitHub", "Apple"]
    href = links[0][1]
    assert href.startswith("/oauth_login/github?")
    params = dict(parse_qsl(urlsplit(href).query))
    assert params == {"redirect_uri": f"{ISSUER}/app?client_id=c&state=s", "state": "state-0"}
    assert dict(parse_qsl(urlsplit(links[1][1]).query))["state"] == "state-1"
    assert social_links(ISSUER, query, {}) == []

    html = render(
        "login.html",
        page(meta=meta),
        title="Sign in",
        password_login=True,
        identifier_label="Email address",
        identifier="",
        social=links,
    )
    assert '<nav class="social" aria-labelledby="social-title">' in html
    assert "Continue with GitHub" in html
    assert "Continue with Apple" in html
    assert "Continue with Google" not in html
    assert "&amp;state=state-0" in html


# -- passkeys and sessions (issue 22) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "method"),
    [
        ({"should_show_totp_screen": True, "should_offer_webauthn_mfa_verify": True}, "totp"),
        ({"should_show_email_otp_screen": True}, "email"),
        ({"should_offer_webauthn_mfa_verify": True}, "webauthn"),
        ({"message": "Logged in successfully", "access_token": "t"}, None),
    ],
)
def test_which_second_factor_page_a_login_answer_asks_for(
    body: dict[str, object], method: str | None
) -> None:
    assert challenge_method(body) == method


def _mfa(method: str, passkey: bool) -> str:
    text = MFA_TEXT[method]
    return render(
        "mfa.html",
        page(meta={"is_webauthn_enabled": True}),
        title="Verify it's you",
        method=method,
        identifier="a@b.c",
        enrolment=None,
        instructions=text.instructions,
        code_label=text.code_label,
        code_hint=text.hint,
        resendable=text.resendable,
        passkey=passkey,
        next_url="/authorize?client_id=c&state=s",
    )


def test_the_code_page_offers_the_passkey_beside_the_code_only_when_the_login_did() -> None:
    both = _mfa("totp", passkey=True)
    assert 'action="/app/mfa"' in both
    assert '<input type="hidden" name="passkey" value="1">' in both  # kept past a wrong code
    assert 'data-passkey="sign-in"' in both
    assert 'data-next="/authorize?client_id=c&amp;state=s" hidden>' in both
    assert "Use a passkey instead" in both
    assert '<script src="/app/assets/passkeys.js" defer></script>' in both

    code_only = _mfa("totp", passkey=False)
    assert 'action="/app/mfa"' in code_only
    assert "data-passkey" not in code_only
    assert "<script" not in code_only

    passkey_only = _mfa("webauthn", passkey=True)
    assert 'action="/app/mfa"' not in passkey_only
    assert "Use your passkey" in passkey_only
    assert "<noscript>" in passkey_only


def test_times_are_shown_in_utc() -> None:
    assert when(0) == ""
    assert when(None) == ""
    assert when(1_764_073_800) == "25 Nov 2025, 12:30 UTC"
