"""The authorize machine: exact effects on the happy paths, every refusal, every table edge.

* Happy paths (code + PKCE, implicit, hybrid, parked request, redemption, binding) are
  asserted effect by effect.
* An exhaustive walk over sample events and policies reaches EVERY (state, event, target)
  edge of the table; Hypothesis drives random event sequences: after every event the
  machine is in a valid state, or raised LocalFlowError and sits in ERROR.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bastion.core.auth.responses import TokenResponse
from bastion.core.oauth import oidc_reauthentication as reauth
from bastion.core.oauth import rfc7636_pkce
from bastion.core.oauth.errors import InvalidClient, InvalidGrant, InvalidRequest
from bastion.core.oauth.rfc6749_authorize import ResponseMode
from bastion.core.oauth.rfc6749_code import CodeGrant, PendingAuthorize
from bastion.core.state_machines._machine import Event, LocalFlowError
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    Fail,
    IssueTokens,
    LoadUser,
    PersistSession,
    Respond,
)
from bastion.core.state_machines.events import TokensIssued, UserLoaded
from bastion.core.state_machines.oauth_authorize import (
    TABLE,
    AuthorizeRequested,
    CodeRedemptionRequested,
    LoginWithState,
    OAuthAuthorizeMachine,
    OAuthPolicy,
    SessionGrant,
    State,
)
from bastion.core.state_machines.oauth_authorize_effects import (
    CheckSession,
    CodeTaken,
    Deliver,
    RedirectToLogin,
    RememberCodeTokens,
    RevokeCodeTokens,
    SessionChecked,
    StoreCode,
    StorePending,
    TakeCode,
)
from tests.core.state_machines.harness import CLIENT_ID, NOW, env, tokens, user

REDIRECT = "https://app.example.com/cb"
VERIFIER = "v" * 43
CHALLENGE = rfc7636_pkce.s256(VERIFIER)
SESSION = SessionGrant(
    user_id="user-1", roles=("user",), login_method="basic_auth", auth_time=NOW - 5, sid="sid-1"
)
KEY = b"k" * 32


def session_created(**how: str) -> AuditRecord:
    return AuditRecord(
        action=AuditAction.SESSION_CREATED,
        actor_id="user-1",
        actor_email="ann@example.com",
        resource_id="user-1",
        metadata={"client_id": CLIENT_ID, **how},
    )


def session_at(auth_time: int) -> SessionGrant:
    return dataclasses.replace(SESSION, auth_time=auth_time)


POLICY = OAuthPolicy(client_id=CLIENT_ID, reauth_key=KEY)
POLICIES = (POLICY, OAuthPolicy(client_id=CLIENT_ID, reauth_key=KEY, login_page=False))


def params(**overrides: str | None) -> dict[str, str]:
    base = {
        "client_id": CLIENT_ID,
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "state": "st-1",
        "nonce": "n-1",
        "code_challenge": CHALLENGE,
        "code_challenge_method": "S256",
    }
    base.update(overrides)  # type: ignore[arg-type]
    return {k: v for k, v in base.items() if v is not None}


def machine(policy: OAuthPolicy = POLICY) -> OAuthAuthorizeMachine:
    return OAuthAuthorizeMachine(env(), policy)


def authorize(
    m: OAuthAuthorizeMachine, session: SessionGrant | None = SESSION, **p: str | None
) -> list[Any]:
    return m.handle(AuthorizeRequested(params=params(**p), redirect_allowed=True, session=session))


GRANT = CodeGrant(
    user_id="user-1",
    roles=("user",),
    scope=("openid", "profile", "email", "offline_access"),
    login_method="basic_auth",
    redirect_uri=REDIRECT,
    auth_time=NOW - 5,
    nonce="n-1",
    code_challenge=CHALLENGE,
    code_challenge_method="S256",
    session_id="sid-1",
)
#: a code asked for without PKCE (only a confidential client may redeem it), and stored
#: before codes named their session
NO_PKCE = CodeGrant(
    user_id="user-1",
    roles=("user",),
    scope=("openid",),
    login_method="basic_auth",
    redirect_uri=REDIRECT,
    auth_time=NOW - 5,
)


# -- happy paths, exact effects ------------------------------------------------------------------


def test_code_flow_with_a_session_stores_a_bound_code_and_redirects_with_it() -> None:
    m = machine()
    assert authorize(m) == [LoadUser(user_id="user-1")]
    effects = m.handle(UserLoaded(user=user()))
    grant = CodeGrant(
        user_id="user-1",
        roles=("user",),
        scope=("openid", "profile", "email"),
        login_method="basic_auth",
        redirect_uri=REDIRECT,
        auth_time=NOW - 5,
        nonce="n-1",
        code_challenge=CHALLENGE,
        code_challenge_method="S256",
        session_id="sid-1",
    )
    assert effects == [
        StoreCode(code="id-1", grant=grant),
        Deliver(
            redirect_uri=REDIRECT,
            mode=ResponseMode.QUERY,
            params=(("code", "id-1"), ("state", "st-1")),
        ),
    ]
    assert m.state is State.DONE


def test_implicit_token_flow_mints_persists_and_answers_in_the_fragment() -> None:
    m = machine()
    authorize(m, response_type="id_token token", code_challenge=None, code_challenge_method=None)
    (issue,) = m.handle(UserLoaded(user=user()))
    assert issue == IssueTokens(
        user=user(),
        roles=("user",),
        scope=("openid", "profile", "email"),
        login_method="basic_auth",
        nonce="id-1",
        include_refresh_token=False,
        oidc_nonce="n-1",
        auth_time=NOW - 5,
    )
    minted = tokens()
    effects = m.handle(TokensIssued(tokens=minted))
    assert effects == [
        PersistSession(user_id="user-1", login_method="basic_auth", tokens=minted),
        session_created(response_type="id_token token"),
        Deliver(
            redirect_uri=REDIRECT,
            mode=ResponseMode.FRAGMENT,
            params=(
                ("access_token", "access.jwt"),
                ("token_type", "Bearer"),
                ("expires_in", "1800"),
                ("id_token", "id.jwt"),
                ("state", "st-1"),
            ),
        ),
    ]


def test_hybrid_flow_returns_code_and_id_token_with_c_hash_input() -> None:
    m = machine()
    authorize(m, response_type="code id_token", response_mode="form_post")
    store, issue = m.handle(UserLoaded(user=user()))
    assert isinstance(store, StoreCode)
    assert isinstance(issue, IssueTokens)
    assert issue.code == "id-1" == store.code
    _, audit, deliver = m.handle(TokensIssued(tokens=tokens(nonce="id-2")))
    assert audit == session_created(response_type="code id_token")
    assert deliver == Deliver(
        redirect_uri=REDIRECT,
        mode=ResponseMode.FORM_POST,
        params=(("code", "id-1"), ("id_token", "id.jwt"), ("state", "st-1")),
    )


def test_no_session_parks_the_request_and_sends_the_browser_to_the_login_page() -> None:
    m = machine()
    effects = authorize(m, session=None, scope="openid offline_access")
    pending = PendingAuthorize(
        redirect_uri=REDIRECT,
        scope=("openid", "offline_access"),
        code="id-1",
        nonce="n-1",
        code_challenge=CHALLENGE,
        code_challenge_method="S256",
    )
    assert effects[0] == StorePending(state="st-1", pending=pending)
    assert isinstance(effects[1], RedirectToLogin)
    assert effects[1].params == (*params(scope="openid offline_access").items(), ("code", "id-1"))
    assert m.state is State.DONE
    (_, to_signup) = machine().handle(
        AuthorizeRequested(params=params(screen_hint="signup"), redirect_allowed=True)
    )
    assert to_signup == RedirectToLogin(
        params=(*params(screen_hint="signup").items(), ("code", "id-1")), signup=True
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_prompt_none_or_no_login_page_without_a_session_is_login_required(
    policy: OAuthPolicy,
) -> None:
    m = machine(policy)
    prompt = "none" if policy.login_page else None
    (deliver,) = authorize(m, session=None, prompt=prompt)
    assert deliver == Deliver(
        redirect_uri=REDIRECT,
        mode=ResponseMode.QUERY,
        params=(
            ("error", "login_required"),
            ("error_description", "login required"),
            ("state", "st-1"),
        ),
    )


# -- prompt=login and max_age ---------------------------------------------------------------------


def login_again(**p: str | None) -> RedirectToLogin:
    """What /authorize answers a signed-in browser that must log in again."""
    effects = authorize(machine(), **p)
    assert isinstance(effects[0], StorePending)
    assert isinstance(effects[1], RedirectToLogin)
    return effects[1]


@pytest.mark.parametrize(
    "demand",
    [{"prompt": "login"}, {"prompt": "consent login"}, {"max_age": "0"}, {"max_age": "4"}],
)
def test_a_demanded_login_sends_a_signed_in_browser_to_log_in_again(
    demand: dict[str, str],
) -> None:
    redirect = login_again(**demand)
    marker = reauth.marker(KEY, "st-1", NOW)
    assert redirect.params == (*params(**demand).items(), ("auth_after", marker), ("code", "id-1"))
    # Coming back with that marker: a login after the demand answers it ...
    answered = authorize(machine(), **demand, auth_after=marker, session=session_at(NOW + 1))
    assert answered == [LoadUser(user_id="user-1")]
    # ... one in the demand's own second does not (it may have come first: prompt=login
    # still asks), nor the old session; the new demand replaces the old marker.
    if "prompt" in demand:
        same_second = authorize(machine(), **demand, auth_after=marker, session=session_at(NOW))
        assert isinstance(same_second[1], RedirectToLogin)
    again = login_again(**demand, auth_after=marker)
    assert dict(again.params)["auth_after"] == marker
    assert [k for k, _ in again.params].count("auth_after") == 1


def test_max_age_not_exceeded_needs_no_new_login() -> None:
    assert authorize(machine(), max_age="5") == [LoadUser(user_id="user-1")]  # 5 s old
    assert authorize(machine(), max_age="60") == [LoadUser(user_id="user-1")]


@pytest.mark.parametrize(
    "forged",
    [
        reauth.marker(b"x" * 32, "st-1", NOW - 60),  # another key
        reauth.marker(KEY, "st-other", NOW - 60),  # another request's
        f"{NOW - 60}.{'0' * 32}",
        f"{NOW - 60}",
        "garbage",
    ],
)
def test_a_forged_or_foreign_marker_answers_nothing(forged: str) -> None:
    redirect = login_again(prompt="login", auth_after=forged)
    assert dict(redirect.params)["auth_after"] == reauth.marker(KEY, "st-1", NOW)


def test_prompt_none_with_a_demanded_login_is_login_required() -> None:
    (deliver,) = authorize(machine(), prompt="none login")
    assert isinstance(deliver, Deliver)
    assert deliver.params[0] == ("error", "login_required")
    (deliver,) = authorize(machine(), prompt="none", max_age="1")
    assert isinstance(deliver, Deliver)
    assert deliver.params[0] == ("error", "login_required")


def test_a_demand_without_a_session_is_marked_too() -> None:
    """So the login that follows answers it: no second trip to the login page."""
    effects = authorize(machine(), session=None, prompt="login")
    assert isinstance(effects[1], RedirectToLogin)
    assert dict(effects[1].params)["auth_after"] == reauth.marker(KEY, "st-1", NOW)


def test_a_revoked_user_behind_the_cookie_counts_as_no_session() -> None:
    m = machine()
    authorize(m, prompt="none")
    (deliver,) = m.handle(UserLoaded(user=user(revoked_timestamp=NOW - 1)))
    assert isinstance(deliver, Deliver)
    assert deliver.params[0] == ("error", "login_required")


def test_redemption_with_the_right_verifier_mints_under_a_new_session() -> None:
    m = machine()
    event = CodeRedemptionRequested(code="c-1", redirect_uri=REDIRECT, code_verifier=VERIFIER)
    assert m.handle(event) == [TakeCode(code="c-1")]
    assert m.handle(CodeTaken(grant=GRANT)) == [CheckSession(user_id="user-1", sid="sid-1")]
    assert m.handle(SessionChecked(alive=True)) == [
        LoadUser(user_id="user-1", session_started=GRANT.auth_time)
    ]
    (issue,) = m.handle(UserLoaded(user=user()))
    assert issue == IssueTokens(
        user=user(),
        roles=("user",),
        scope=GRANT.scope,
        login_method="basic_auth",
        nonce="id-1",
        include_refresh_token=True,
        oidc_nonce="n-1",
        auth_time=NOW - 5,
    )
    minted = tokens(refresh=True)
    effects = m.handle(TokensIssued(tokens=minted))
    assert effects == [
        PersistSession(user_id="user-1", login_method="basic_auth", tokens=minted),
        RememberCodeTokens(code="c-1", user_id="user-1", nonce="id-1"),
        session_created(grant_type="authorization_code"),
        Respond(
            result=TokenResponse(
                access_token="access.jwt",
                id_token="id.jwt",
                refresh_token="refresh.jwt",
                scope=GRANT.scope,
                roles=("user",),
                expires_in=1800,
            )
        ),
    ]


def test_a_used_or_unknown_code_revokes_what_it_issued_and_is_invalid_grant() -> None:
    m = machine()
    m.handle(CodeRedemptionRequested(code="c-1", redirect_uri=REDIRECT, code_verifier=VERIFIER))
    revoke, fail = m.handle(CodeTaken(grant=None))
    assert revoke == RevokeCodeTokens(code="c-1")
    assert fail == Fail(
        error=InvalidGrant, message="The authorization code is invalid or has expired"
    )
    assert m.state is State.FAILED


def test_a_code_whose_session_ended_is_invalid_grant() -> None:
    """Logged out, or revoked from another device, between authorize and redemption."""
    m = machine()
    m.handle(CodeRedemptionRequested(code="c-1", redirect_uri=REDIRECT, code_verifier=VERIFIER))
    assert m.handle(CodeTaken(grant=GRANT)) == [CheckSession(user_id="user-1", sid="sid-1")]
    assert m.handle(SessionChecked(alive=False)) == [
        Fail(error=InvalidGrant, message="The authorization code is invalid or has expired")
    ]
    assert m.state is State.FAILED


def _fail_of(event: CodeRedemptionRequested, grant: CodeGrant | None = GRANT) -> Fail:
    m = machine()
    effects = m.handle(event)
    if effects and isinstance(effects[-1], Fail):
        return effects[-1]
    effects = m.handle(CodeTaken(grant=grant))
    if isinstance(effects[-1], CheckSession):
        effects = m.handle(SessionChecked(alive=True))
    assert isinstance(effects[-1], Fail), effects
    return effects[-1]


REDEMPTION_REFUSALS = {
    "wrong verifier": (
        {"code_verifier": "w" * 43},
        GRANT,
        InvalidGrant,
        "code_verifier does not match the code_challenge",
    ),
    "no verifier": ({"code_verifier": None}, GRANT, InvalidRequest, "code_verifier is required"),
    "other redirect": (
        {"redirect_uri": "https://app.example.com/other"},
        GRANT,
        InvalidGrant,
        "redirect_uri does not match the authorization request",
    ),
    "public client without pkce": (
        {"code_verifier": None},
        NO_PKCE,
        InvalidClient,
        "client authentication or PKCE is required",
    ),
    "verifier for a code without challenge": (
        {},
        NO_PKCE,
        InvalidGrant,
        "code_verifier given but the code has no challenge",
    ),
    "bad secret": (
        {"client_authenticated": False},
        GRANT,
        InvalidClient,
        "invalid client credentials",
    ),
    "no code": ({"code": ""}, GRANT, InvalidRequest, "code is required"),
    "no redirect": ({"redirect_uri": ""}, GRANT, InvalidRequest, "redirect_uri is required"),
}


@pytest.mark.parametrize(
    ("event", "grant", "error", "message"),
    list(REDEMPTION_REFUSALS.values()),
    ids=list(REDEMPTION_REFUSALS),
)
def test_redemption_refusals(
    event: dict[str, Any], grant: CodeGrant, error: type[Exception], message: str
) -> None:
    base: dict[str, Any] = {"code": "c-1", "redirect_uri": REDIRECT, "code_verifier": VERIFIER}
    fail = _fail_of(CodeRedemptionRequested(**{**base, **event}), grant)
    assert (fail.error, fail.message) == (error, message)


def test_a_confidential_client_redeems_without_pkce() -> None:
    m = machine()
    m.handle(CodeRedemptionRequested(code="c", redirect_uri=REDIRECT, client_authenticated=True))
    assert m.handle(CodeTaken(grant=NO_PKCE)) == [
        LoadUser(user_id="user-1", session_started=NO_PKCE.auth_time)
    ]


def test_a_login_with_the_state_binds_the_announced_code() -> None:
    m = machine()
    pending = PendingAuthorize(redirect_uri=REDIRECT, scope=("openid",), code="c-9", nonce="n-9")
    event = LoginWithState(
        pending=pending,
        user_id="user-1",
        roles=("user",),
        login_method="magic_link_login",
        auth_time=NOW,
        sid="sid-9",
    )
    grant = CodeGrant(
        user_id="user-1",
        roles=("user",),
        scope=("openid",),
        login_method="magic_link_login",
        redirect_uri=REDIRECT,
        auth_time=NOW,
        nonce="n-9",
        session_id="sid-9",
    )
    assert m.handle(event) == [StoreCode(code="c-9", grant=grant)]
    assert m.state is State.DONE


# -- refusals of the authorize request -----------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "allowed", "error", "message"),
    [
        ({"client_id": None}, True, "invalid_request", "client_id is required"),
        ({"client_id": "other"}, True, "invalid_client", "The client_id is invalid"),
        ({"redirect_uri": None}, True, "invalid_request", "redirect_uri is required"),
        ({}, False, "invalid_request", "invalid redirect_uri"),
    ],
)
def test_untrusted_client_or_redirect_is_a_plain_error_never_a_redirect(
    overrides: dict[str, str | None], allowed: bool, error: str, message: str
) -> None:
    m = machine()
    (fail,) = m.handle(
        AuthorizeRequested(params=params(**overrides), redirect_allowed=allowed, session=SESSION)
    )
    assert isinstance(fail, Fail)
    assert (fail.error.error, fail.message) == (error, message)  # type: ignore[attr-defined]


Q, F = ResponseMode.QUERY, ResponseMode.FRAGMENT
REDIRECTED_REFUSALS: list[tuple[dict[str, str | None], str, str, ResponseMode]] = [
    (
        {"response_type": "code token id_token x"},
        "unsupported_response_type",
        "response_type code token id_token x is not supported",
        Q,
    ),
    ({"response_mode": "carrier-pigeon"}, "invalid_request", "response_mode is not supported", Q),
    ({"state": None}, "invalid_request", "state parameter is required", Q),
    (
        {"response_type": "token", "response_mode": "query"},
        "invalid_request",
        "response_mode query is only allowed with response_type code",
        Q,
    ),
    (
        {"response_type": "id_token", "nonce": None},
        "invalid_request",
        "nonce is required for this response_type",
        F,
    ),
    (
        {"code_challenge": None},
        "invalid_request",
        "code_challenge_method without code_challenge",
        Q,
    ),
    (
        {"code_challenge_method": "plain"},
        "invalid_request",
        "code_challenge_method must be S256",
        Q,
    ),
    ({"code_challenge": "short"}, "invalid_request", "invalid code_challenge", Q),
    ({"max_age": "-1"}, "invalid_request", "max_age must be a whole number of seconds", Q),
    ({"max_age": "1.5"}, "invalid_request", "max_age must be a whole number of seconds", Q),
]


@pytest.mark.parametrize(("overrides", "error", "message", "mode"), REDIRECTED_REFUSALS)
def test_other_refusals_go_back_to_the_redirect_uri(
    overrides: dict[str, str | None], error: str, message: str, mode: ResponseMode
) -> None:
    m = machine()
    (deliver,) = authorize(m, **overrides)
    assert isinstance(deliver, Deliver)
    assert deliver.mode is mode
    assert deliver.params[:2] == (("error", error), ("error_description", message))
    assert dict(deliver.params).get("state") == overrides.get("state", "st-1")


def test_default_response_type_is_code_and_token_only_when_asked() -> None:
    m = machine()
    authorize(m, response_type=None)
    (store, deliver) = m.handle(UserLoaded(user=user()))
    assert isinstance(store, StoreCode)
    assert dict(deliver.params).keys() == {"code", "state"}
    implicit_default = OAuthPolicy(
        client_id=CLIENT_ID, reauth_key=KEY, default_response_type="token"
    )
    m = machine(implicit_default)
    authorize(m, response_type=None)
    assert isinstance(m.handle(UserLoaded(user=user()))[0], IssueTokens)


# -- every edge, and random sequences ------------------------------------------------------------


def samples() -> dict[type[Event], list[Event]]:
    authorize_events: list[Event] = [
        AuthorizeRequested(params=params(**p), redirect_allowed=ok, session=s)
        for p in (
            {},
            {"response_type": "token", "code_challenge": None, "code_challenge_method": None},
            {"response_type": "code id_token"},
            {"prompt": "none"},
            {"client_id": "x"},
            {"state": None},
        )
        for ok in (True, False)
        for s in (SESSION, None)
    ]
    redeem = [
        CodeRedemptionRequested(
            code="c", redirect_uri=REDIRECT, code_verifier=v, client_authenticated=a
        )
        for v in (VERIFIER, None, "w" * 43)
        for a in (None, True, False)
    ]
    return {
        AuthorizeRequested: authorize_events,
        UserLoaded: [
            UserLoaded(user=user()),
            UserLoaded(user=None),
            UserLoaded(user=user(revoked_timestamp=NOW)),
        ],
        TokensIssued: [TokensIssued(tokens=tokens()), TokensIssued(tokens=tokens(refresh=True))],
        CodeRedemptionRequested: redeem,
        CodeTaken: [CodeTaken(grant=GRANT), CodeTaken(grant=NO_PKCE), CodeTaken(grant=None)],
        SessionChecked: [SessionChecked(alive=True), SessionChecked(alive=False)],
        LoginWithState: [
            LoginWithState(
                pending=PendingAuthorize(redirect_uri=REDIRECT, scope=("openid",), code=c),
                user_id="u",
                roles=(),
                login_method="basic_auth",
                auth_time=NOW,
                sid="sid-1",
            )
            for c in ("c-1", None)
        ],
    }


SAMPLES = samples()


def test_every_table_edge_is_reachable() -> None:
    wanted = {(state, event, target) for (state, event), e in TABLE.items() for target in e.targets}
    seen: set[tuple[State, type[Event], State]] = set()
    emitted: set[type[Any]] = set()
    for policy in POLICIES:
        queue = deque([machine(policy)])
        while queue:
            current = queue.popleft()
            for (state, event_type), _ in TABLE.items():
                if state is not current.state:
                    continue
                for event in SAMPLES[event_type]:
                    m = copy.deepcopy(current)
                    emitted.update(type(e) for e in m.handle(event))
                    seen.add((state, event_type, m.state))
                    parked = m.to_dict()["context"]
                    assert parked["code"] is None
                    assert parked["redeem"] is None or parked["redeem"]["code"] is None
                    if m.state not in (State.DONE, State.FAILED):
                        queue.append(m)
    assert wanted == seen
    assert emitted == OAuthAuthorizeMachine.EMITS


def test_every_missing_pair_is_loud_and_terminal() -> None:
    for state in State:
        for event_type, events in SAMPLES.items():
            if (state, event_type) in TABLE:
                continue
            m = machine()
            m._state = state
            with pytest.raises(LocalFlowError):
                m.handle(events[0])
            assert m.state is State.ERROR


ALL_SAMPLES = [e for events in SAMPLES.values() for e in events]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ALL_SAMPLES), min_size=1, max_size=6))
def test_random_sequences_end_valid_or_in_error(events: list[Event]) -> None:
    m = machine()
    for event in events:
        try:
            effects = m.handle(event)
        except LocalFlowError:
            assert m.state is State.ERROR
            return
        assert m.state is not State.ERROR
        assert all(not e.replies for e in effects[:-1])
        if effects and isinstance(effects[-1], Fail):
            assert m.state is State.FAILED
