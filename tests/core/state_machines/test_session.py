"""Session rotation, refresh, logout and revoke."""

from __future__ import annotations

import pytest

from bastion.core.auth.responses import AuthResponse, MessageResponse, TokenResponse
from bastion.core.errors import InvalidArgument, NotFound, PermissionDenied, Unauthenticated
from bastion.core.state_machines.effects import (
    AuditAction,
    AuditRecord,
    CheckRequiredRelations,
    ClearSessionCookie,
    DeleteSession,
    Fail,
    IssueTokens,
    LoadStoredToken,
    LoadUser,
    PersistSession,
    Respond,
    SetSessionCookie,
)
from bastion.core.state_machines.events import (
    RelationsChecked,
    StoredTokenLoaded,
    TokensIssued,
    UserLoaded,
)
from bastion.core.state_machines.session import (
    LogoutRequested,
    RefreshRequested,
    RevokeRequested,
    SessionMachine,
    SessionRef,
    SessionRequested,
    State,
)
from tests.core.state_machines.drive import drive, last
from tests.core.state_machines.harness import (
    NOW,
    STORED,
    cookie_claims,
    env,
    refresh_claims,
    tokens,
    user,
)

OLD = DeleteSession(user_id="user-1", login_method="basic_auth", nonce="old-nonce")
SCOPE = ("openid", "offline_access")
UNAUTHORIZED = Fail(error=Unauthenticated, message="unauthorized")


def test_rotation_replaces_the_session() -> None:
    machine, account, issued = SessionMachine(env()), user(), tokens(refresh=True)
    steps = drive(
        machine,
        SessionRequested(cookie=STORED, claims=cookie_claims()),
        StoredTokenLoaded(token=STORED),
        UserLoaded(user=account),
        TokensIssued(tokens=issued),
    )
    assert steps == [
        [
            LoadStoredToken(
                user_id="user-1", login_method="basic_auth", nonce="old-nonce", kind="session_token"
            )
        ],
        [LoadUser(user_id="user-1")],
        [
            IssueTokens(
                user=account,
                roles=("user",),
                scope=SCOPE,
                login_method="basic_auth",
                nonce="id-1",
                include_refresh_token=True,
                auth_time=NOW - 10,
            )
        ],
        [
            OLD,
            PersistSession(user_id="user-1", login_method="basic_auth", tokens=issued),
            SetSessionCookie(value="session-blob"),
            Respond(result=AuthResponse.with_tokens("Session token refreshed", account, issued)),
        ],
    ]
    assert machine.state is State.DONE


@pytest.mark.parametrize(
    "events",
    [
        (SessionRequested(cookie=None, claims=cookie_claims()),),
        (SessionRequested(cookie=STORED, claims=None),),
        (SessionRequested(cookie=STORED, claims=cookie_claims(exp=NOW)),),
        (SessionRequested(cookie=STORED, claims=cookie_claims(nonce=5)),),
        (SessionRequested(cookie=STORED, claims=cookie_claims(), roles=("admin",)),),
        (SessionRequested(cookie=STORED, claims=cookie_claims()), StoredTokenLoaded(token=None)),
        (
            SessionRequested(cookie=STORED, claims=cookie_claims()),
            StoredTokenLoaded(token="rotated-away"),
        ),
        (
            SessionRequested(cookie=STORED, claims=cookie_claims()),
            StoredTokenLoaded(token=STORED),
            UserLoaded(user=user(revoked_timestamp=1)),
        ),
    ],
    ids=["no-cookie", "unreadable", "expired", "malformed", "role", "gone", "stale", "revoked"],
)
def test_rotation_refusals_are_unauthorized(events: tuple[object, ...]) -> None:
    machine = SessionMachine(env())
    assert last(machine, *events) == [UNAUTHORIZED]  # type: ignore[arg-type]
    assert machine.state is State.FAILED


def test_required_relations_gate_the_rotation() -> None:
    relations = (("viewer", "doc:1"),)
    request = SessionRequested(cookie=STORED, claims=cookie_claims(), required_relations=relations)
    machine = SessionMachine(env())
    effects = last(machine, request, StoredTokenLoaded(token=STORED), UserLoaded(user=user()))
    assert effects == [CheckRequiredRelations(user_id="user-1", relations=relations)]
    assert machine.handle(RelationsChecked(allowed=False)) == [
        Fail(error=PermissionDenied, message="unauthorized")
    ]


def test_refresh_rotates_and_answers_the_token_endpoint() -> None:
    machine, issued = SessionMachine(env()), tokens(refresh=True)
    steps = drive(
        machine,
        RefreshRequested(refresh_token=STORED, claims=refresh_claims()),
        StoredTokenLoaded(token=STORED),
        UserLoaded(user=user()),
        TokensIssued(tokens=issued),
    )
    assert steps[0] == [
        LoadStoredToken(
            user_id="user-1", login_method="basic_auth", nonce="old-nonce", kind="refresh_token"
        )
    ]
    result = TokenResponse(
        access_token="access.jwt",
        id_token="id.jwt",
        refresh_token="refresh.jwt",
        scope=SCOPE,
        roles=("user",),
        expires_in=1800,
    )
    assert steps[3] == [
        OLD,
        PersistSession(user_id="user-1", login_method="basic_auth", tokens=issued),
        SetSessionCookie(value="session-blob"),
        AuditRecord(
            action=AuditAction.TOKEN_REFRESHED,
            actor_id="user-1",
            actor_email="ann@example.com",
            resource_type="token",
            resource_id="user-1",
        ),
        Respond(result=result),
    ]
    assert result.to_api_dict() == {
        "access_token": "access.jwt",
        "token_type": "Bearer",
        "id_token": "id.jwt",
        "scope": "openid offline_access",
        "roles": ["user"],
        "expires_in": 1800,
        "refresh_token": "refresh.jwt",
    }


@pytest.mark.parametrize(
    "claims",
    [
        None,
        refresh_claims(aud="other"),
        refresh_claims(iss="https://evil.example"),
        refresh_claims(token_type="access_token"),
        refresh_claims(exp=NOW),
    ],
)
def test_refresh_refusals(claims: dict[str, object] | None) -> None:
    machine = SessionMachine(env())
    assert machine.handle(RefreshRequested(refresh_token=STORED, claims=claims)) == [
        Fail(error=Unauthenticated, message="Invalid refresh token")
    ]


def test_a_used_refresh_token_is_refused() -> None:
    effects = last(
        SessionMachine(env()),
        RefreshRequested(refresh_token=STORED, claims=refresh_claims()),
        StoredTokenLoaded(token=None),
    )
    assert effects == [Fail(error=Unauthenticated, message="Invalid refresh token")]


def test_logout() -> None:
    ref = SessionRef(user_id="user-1", login_method="basic_auth", nonce="old-nonce")
    assert SessionMachine(env()).handle(LogoutRequested(session=ref)) == [
        OLD,
        ClearSessionCookie(),
        AuditRecord(
            action=AuditAction.LOGOUT,
            actor_id="user-1",
            resource_type="session",
            resource_id="user-1",
        ),
        Respond(result=MessageResponse(message="Logged out successfully")),
    ]
    assert SessionMachine(env()).handle(LogoutRequested(session=None)) == [UNAUTHORIZED]


def test_revoke() -> None:
    machine = SessionMachine(env())
    effects = last(
        machine,
        RevokeRequested(refresh_token=STORED, claims=refresh_claims()),
        StoredTokenLoaded(token=STORED),
    )
    assert effects == [
        OLD,
        AuditRecord(
            action=AuditAction.TOKEN_REVOKED,
            actor_id="user-1",
            resource_type="token",
            resource_id="user-1",
        ),
        Respond(result=MessageResponse(message="Token revoked")),
    ]


@pytest.mark.parametrize(
    ("claims", "stored", "error", "message"),
    [
        (None, None, InvalidArgument, "invalid token"),
        ({"sub": "user-1"}, None, InvalidArgument, "invalid token"),
        (refresh_claims(), None, NotFound, "token not found"),
        (refresh_claims(), "other", InvalidArgument, "token does not match"),
    ],
)
def test_revoke_refusals(
    claims: dict[str, object] | None, stored: str | None, error: type, message: str
) -> None:
    machine = SessionMachine(env())
    effects = machine.handle(RevokeRequested(refresh_token=STORED, claims=claims))
    if claims is not None and "nonce" in claims:
        effects = machine.handle(StoredTokenLoaded(token=stored))
    assert effects == [Fail(error=error, message=message)]
