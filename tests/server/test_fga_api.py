"""The authorization engine's REST API over real HTTP, on SQLite and PostgreSQL.

Every rule of the spec's check_permissions / list_permissions sections and of the
/v1/admin/fga/* table, the consistency contract across two server processes sharing a
database, and the engine switched off with --fga-store=none.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.dbfixtures import fresh_database_url
from tests.server.harness import ADMIN_SECRET, ServerProcess, base_flags, running

ADMIN = {"x-service-admin-secret": ADMIN_SECRET}
KINDS = ["sqlite", "postgres"]

MODEL = """model
  schema 1.1

type user

type group
  relations
    define member: [user, group#member]

type folder
  relations
    define parent: [folder]
    define viewer: [user, group#member] or viewer from parent

type document
  relations
    define blocked: [user]
    define editor: [user, user:*]
    define parent: [folder]
    define viewer: [user, user with in_hours] or editor or viewer from parent
    define can_view: viewer but not blocked

type sheet
  relations
    define reader: [user]

condition in_hours(hour: int) {
  hour >= 9 && hour < 17
}
"""


def server_flags(kind: str, url: str, *extra: str) -> list[str]:
    database_type = "postgres" if kind == "postgres" else "sqlite"
    return [*base_flags(database_type, url), *extra]


def sync_url(kind: str, url: str) -> str:
    """A SQLAlchemy URL with a synchronous driver, to look at the database directly."""
    if kind == "postgres":
        return url.replace("postgresql://", "postgresql+psycopg://", 1)
    return f"sqlite:///{url}"


def audit_actions(kind: str, url: str) -> list[str]:
    engine = sa.create_engine(sync_url(kind, url))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT action FROM service_audit_logs")).scalars()
            return list(rows)
    finally:
        engine.dispose()


def post(client: httpx.Client, path: str, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return client.post(path, json=body, **kwargs)


def admin(client: httpx.Client, path: str, body: dict[str, Any] | None = None) -> Any:
    """POST as the super-admin and expect 200."""
    response = client.post(path, json=body or {}, headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json()


def tuple_(user: str, relation: str, obj: str, **extra: Any) -> dict[str, Any]:
    return {"user": user, "relation": relation, "object": obj, **extra}


def write(client: httpx.Client, *tuples: dict[str, Any]) -> None:
    admin(client, "/v1/admin/fga/tuples", {"tuples": list(tuples)})


def checks(client: httpx.Client, user: str, *pairs: tuple[str, str]) -> list[bool]:
    body = {"user": user, "checks": [{"relation": r, "object": o} for r, o in pairs]}
    return [r["allowed"] for r in admin(client, "/v1/check_permissions", body)["results"]]


def error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code
    message: str = body["message"]
    return message


def uid() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="module", params=KINDS)
def database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, str, Path]:
    kind: str = request.param
    tmp = tmp_path_factory.mktemp(f"fga-{kind}")
    return kind, fresh_database_url(kind, tmp, purpose="fga_api"), tmp


@pytest.fixture(scope="module")
def server(database: tuple[str, str, Path]) -> Iterator[ServerProcess]:
    kind, url, tmp = database
    with running(server_flags(kind, url), tmp, name="fga") as srv:
        with srv.client() as client:
            admin(client, "/v1/admin/fga/model", {"dsl": MODEL})
        yield srv


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


# ---------------------------------------------------------------- model and store lifecycle


@pytest.mark.parametrize("kind", KINDS)
def test_model_versions_reset_and_audit(kind: str, tmp_path: Path) -> None:
    url = fresh_database_url(kind, tmp_path, purpose="fga_lifecycle")
    with running(server_flags(kind, url), tmp_path) as srv, srv.client() as c:
        empty = c.get("/v1/admin/fga/model", headers=ADMIN)
        assert empty.status_code == 200
        assert empty.json() == {"id": "", "dsl": ""}
        first = admin(c, "/v1/admin/fga/model", {"dsl": MODEL})
        assert first["id"]
        assert "define can_view: viewer but not blocked" in first["dsl"]
        assert c.get("/v1/admin/fga/model", headers=ADMIN).json() == first
        second_dsl = MODEL.replace("define reader: [user]", "define reader: [user, group#member]")
        second = admin(c, "/v1/admin/fga/model", {"dsl": second_dsl})
        assert second["id"] != first["id"]
        assert second["id"] > first["id"]
        assert c.get("/v1/admin/fga/model", headers=ADMIN).json() == second

        write(c, tuple_("ann", "reader", "sheet:1"))
        refused = post(c, "/v1/admin/fga/reset", {}, headers=ADMIN)
        assert error(refused, 400, "failed_precondition") == (
            "remove all relationship tuples before resetting the authorization model"
        )
        admin(c, "/v1/admin/fga/tuples/delete", {"tuples": [tuple_("ann", "reader", "sheet:1")]})
        assert admin(c, "/v1/admin/fga/reset") == {
            "message": "Authorization model reset successfully"
        }
        assert c.get("/v1/admin/fga/model", headers=ADMIN).json() == {"id": "", "dsl": ""}
        # After a reset there is no model: writes are refused until one is installed.
        no_model = post(
            c, "/v1/admin/fga/tuples", {"tuples": [tuple_("a", "reader", "sheet:1")]}, headers=ADMIN
        )
        assert error(no_model, 400, "failed_precondition") == "no authorization model written yet"
    actions = audit_actions(kind, url)
    assert actions.count("admin.fga_reset") == 1
    assert actions.count("admin.fga_model_written") == 2
    assert "admin.fga_tuples_written" in actions
    assert "admin.fga_tuples_deleted" in actions


def test_write_model_rejects_bad_dsl(client: httpx.Client) -> None:
    missing = post(client, "/v1/admin/fga/model", {}, headers=ADMIN)
    assert error(missing, 400, "invalid_argument") == "dsl is required"
    syntax = post(
        client, "/v1/admin/fga/model", {"dsl": "model\n  schema 1.1\ntype"}, headers=ADMIN
    )
    assert error(syntax, 400, "invalid_argument").startswith("invalid DSL: ")
    semantic = post(
        client,
        "/v1/admin/fga/model",
        {"dsl": "model\n  schema 1.1\ntype doc\n  relations\n    define v: nope\n"},
        headers=ADMIN,
    )
    assert "nope" in error(semantic, 400, "invalid_argument")


def test_admin_operations_need_admin_credentials(client: httpx.Client) -> None:
    for method, path in [
        ("GET", "/v1/admin/fga/model"),
        ("POST", "/v1/admin/fga/model"),
        ("POST", "/v1/admin/fga/tuples"),
        ("POST", "/v1/admin/fga/tuples/delete"),
        ("POST", "/v1/admin/fga/tuples/read"),
        ("POST", "/v1/admin/fga/list_users"),
        ("POST", "/v1/admin/fga/expand"),
        ("POST", "/v1/admin/fga/reset"),
    ]:
        response = client.request(method, path, json={} if method == "POST" else None)
        assert error(response, 401, "unauthenticated") == "unauthorized", path


# ---------------------------------------------------------------- tuples


def test_write_validates_against_the_model_and_writes_nothing_of_a_bad_batch(
    client: httpx.Client,
) -> None:
    who = uid()
    good = tuple_(who, "reader", f"sheet:{who}")
    cases = {
        "type 'nosuch' not found": tuple_(who, "reader", "nosuch:1"),
        "relation 'sheet#nosuch' not found": tuple_(who, "nosuch", "sheet:1"),
        "do not admit 'group:x#member'": tuple_("group:x#member", "reader", "sheet:1"),
        "condition 'nope' not found": tuple_(
            who, "viewer", "document:1", condition={"name": "nope"}
        ),
    }
    for reason, bad in cases.items():
        response = post(client, "/v1/admin/fga/tuples", {"tuples": [good, bad]}, headers=ADMIN)
        message = error(response, 400, "invalid_argument")
        assert message.startswith('invalid tuple "'), message
        assert reason in message, message
        assert message.endswith("must be defined in the active authorization model (Step 1)")
    read = admin(client, "/v1/admin/fga/tuples/read", {"user": who})
    assert read["tuples"] == []
    write(client, good)
    again = post(client, "/v1/admin/fga/tuples", {"tuples": [good]}, headers=ADMIN)
    assert "already exists" in error(again, 400, "invalid_argument")


def test_tuple_request_limits(client: httpx.Client) -> None:
    who = uid()
    path = "/v1/admin/fga/tuples"
    empty = post(client, path, {"tuples": []}, headers=ADMIN)
    assert error(empty, 400, "invalid_argument") == "at least one tuple is required"
    many = [tuple_(who, "reader", f"sheet:{i}") for i in range(101)]
    too_many = post(client, path, {"tuples": many}, headers=ADMIN)
    assert error(too_many, 400, "invalid_argument") == "too many tuples: max 100 per request"
    partial = post(client, path, {"tuples": [{"user": who, "relation": "reader"}]}, headers=ADMIN)
    assert (
        error(partial, 400, "invalid_argument") == "each tuple requires user, relation and object"
    )
    write(client, *many[:100])  # exactly 100 is allowed
    missing = post(
        client,
        "/v1/admin/fga/tuples/delete",
        {"tuples": [many[0], tuple_(who, "reader", "sheet:missing")]},
        headers=ADMIN,
    )
    assert "does not exist" in error(missing, 400, "invalid_argument")
    # The delete was all or nothing: sheet:0 is still there.
    assert checks(client, who, ("reader", "sheet:0")) == [True]
    # A stored condition context is at most OpenFGA's 32 KiB of JSON; nothing is written.
    doc = f"document:{who}-context"
    huge = {"name": "in_hours", "context": {"hour": "9" * 33_000}}
    too_large = post(
        client, path, {"tuples": [tuple_(who, "viewer", doc, condition=huge)]}, headers=ADMIN
    )
    assert "at most 32768 (32 KiB)" in error(too_large, 400, "invalid_argument")
    assert admin(client, "/v1/admin/fga/tuples/read", {"object": doc})["tuples"] == []


def test_read_filters_pages_and_bare_ids(client: httpx.Client) -> None:
    who = uid()
    for start in (0, 100, 200):
        write(
            client, *(tuple_(who, "reader", f"sheet:{who}-{i}") for i in range(start, start + 100))
        )
    write(client, tuple_(who, "viewer", f"document:{who}"))
    read = "/v1/admin/fga/tuples/read"
    seen: list[str] = []
    token = ""
    sizes = []
    while True:
        page = admin(client, read, {"user": who, "relation": "reader", "continuation_token": token})
        sizes.append(len(page["tuples"]))
        seen += [t["object"] for t in page["tuples"]]
        token = page["continuation_token"]
        if not token:
            break
    assert sizes == [100, 100, 100]
    assert sorted(seen) == sorted(f"sheet:{who}-{i}" for i in range(300))
    assert all(t["user"] == f"user:{who}" for t in admin(client, read, {"user": who})["tuples"])
    big = admin(client, read, {"user": f"user:{who}", "page_size": 1000})
    assert len(big["tuples"]) == 100
    assert big["continuation_token"]
    small = admin(client, read, {"user": who, "page_size": 7})
    assert len(small["tuples"]) == 7
    by_type = admin(client, read, {"user": who, "object": "document:"})
    assert by_type == {
        "tuples": [tuple_(f"user:{who}", "viewer", f"document:{who}")],
        "continuation_token": "",
    }
    exact = admin(client, read, {"object": f"sheet:{who}-7"})
    assert exact["tuples"] == [tuple_(f"user:{who}", "reader", f"sheet:{who}-7")]
    bad = post(client, read, {"continuation_token": "not a token!"}, headers=ADMIN)
    assert error(bad, 400, "invalid_argument") == "invalid continuation token"


# ---------------------------------------------------------------- check_permissions


def test_check_permissions_rules(client: httpx.Client) -> None:
    who, other = uid(), uid()
    doc, folder, sub = f"document:{who}", f"folder:{who}", f"folder:{who}-sub"
    write(
        client,
        tuple_(other, "member", f"group:{who}"),
        tuple_(f"group:{who}#member", "viewer", folder),
        tuple_(folder, "parent", sub),
        tuple_(sub, "parent", doc),
        tuple_(who, "viewer", doc),
        tuple_(who, "blocked", doc),
    )
    body = {
        "user": other,
        "checks": [
            {"relation": "can_view", "object": doc},
            {"relation": "viewer", "object": f"document:{who}-none"},
            {"relation": "viewer", "object": doc},
        ],
    }
    results = admin(client, "/v1/check_permissions", body)["results"]
    assert results == [
        {"relation": "can_view", "object": doc, "allowed": True},
        {"relation": "viewer", "object": f"document:{who}-none", "allowed": False},
        {"relation": "viewer", "object": doc, "allowed": True},
    ]
    # A bare id and user:<id> are the same subject; blocked wins for who.
    assert checks(client, who, ("viewer", doc), ("can_view", doc)) == [True, False]
    assert checks(client, f"user:{who}", ("viewer", doc), ("can_view", doc)) == [True, False]


def test_contextual_tuples_apply_to_one_check_and_are_never_stored(client: httpx.Client) -> None:
    who = uid()
    doc = f"document:{who}"
    extra = [tuple_(who, "editor", doc)]
    body = {
        "user": who,
        "checks": [
            {"relation": "viewer", "object": doc, "contextual_tuples": extra},
            {"relation": "viewer", "object": doc},
        ],
    }
    results = admin(client, "/v1/check_permissions", body)["results"]
    assert [r["allowed"] for r in results] == [True, False]
    assert admin(client, "/v1/admin/fga/tuples/read", {"object": doc})["tuples"] == []
    too_many = {
        "user": who,
        "checks": [{"relation": "viewer", "object": doc, "contextual_tuples": extra * 101}],
    }
    response = post(client, "/v1/check_permissions", too_many, headers=ADMIN)
    assert error(response, 400, "invalid_argument") == (
        "too many contextual tuples: max 100 per check"
    )


def test_conditions_and_wildcards(client: httpx.Client) -> None:
    who = uid()
    doc, public = f"document:{who}", f"document:{who}-public"
    write(
        client,
        tuple_(who, "viewer", doc, condition={"name": "in_hours"}),
        tuple_("user:*", "editor", public),
    )
    assert checks(client, uid(), ("viewer", public)) == [True]
    # The condition needs `hour`: without it that check reports why, the others answer.
    body = {
        "user": who,
        "checks": [
            {"relation": "viewer", "object": doc},
            {"relation": "viewer", "object": doc, "context": {"hour": 10}},
            {"relation": "viewer", "object": doc, "context": {"hour": 20}},
        ],
    }
    missing, inside, outside = admin(client, "/v1/check_permissions", body)["results"]
    assert missing["allowed"] is False
    assert missing["error"]["code"] == "invalid_argument"
    assert "'hour'" in missing["error"]["message"]
    assert (inside, outside) == (
        {"relation": "viewer", "object": doc, "allowed": True},
        {"relation": "viewer", "object": doc, "allowed": False},
    )
    bad = post(
        client,
        "/v1/check_permissions",
        {"user": who, "checks": [{"relation": "viewer", "object": doc, "context": [1]}]},
        headers=ADMIN,
    )
    assert error(bad, 400, "invalid_argument")
    stored = admin(client, "/v1/admin/fga/tuples/read", {"object": doc})["tuples"]
    assert stored == [
        tuple_(f"user:{who}", "viewer", doc, condition={"name": "in_hours", "context": {}})
    ]
    # `user:*` reaches every user of later tests' list_permissions: take it back.
    admin(client, "/v1/admin/fga/tuples/delete", {"tuples": [tuple_("user:*", "editor", public)]})
    assert checks(client, uid(), ("viewer", public)) == [False]


def test_check_count_boundaries(client: httpx.Client) -> None:
    who = uid()
    one = {"relation": "reader", "object": f"sheet:{who}"}
    ok = admin(client, "/v1/check_permissions", {"user": who, "checks": [one] * 100})
    assert len(ok["results"]) == 100
    over = post(
        client, "/v1/check_permissions", {"user": who, "checks": [one] * 101}, headers=ADMIN
    )
    assert error(over, 400, "invalid_argument") == "too many checks: max 100 per request"
    none = post(client, "/v1/check_permissions", {"user": who, "checks": []}, headers=ADMIN)
    assert error(none, 400, "invalid_argument") == "at least one check is required"
    half = post(
        client, "/v1/check_permissions", {"user": who, "checks": [{"relation": "r"}]}, headers=ADMIN
    )
    assert error(half, 400, "invalid_argument") == "each check requires relation and object"


def test_subject_rules(client: httpx.Client) -> None:
    one = [{"relation": "reader", "object": "sheet:1"}]
    for path, body in [("/v1/check_permissions", {"checks": one}), ("/v1/list_permissions", {})]:
        # No admin credentials: the caller's own identity would be the subject, and there
        # is none here.
        assert (
            error(post(client, path, {**body, "user": "someone"}), 401, "unauthenticated")
            == "unauthorized"
        )
        assert error(post(client, path, body), 401, "unauthenticated") == "unauthorized"
        # An admin names the subject; a userset is no subject.
        assert error(post(client, path, body, headers=ADMIN), 400, "invalid_argument")
        userset = post(client, path, {**body, "user": "group:x#member"}, headers=ADMIN)
        assert "not a userset" in error(userset, 400, "invalid_argument")


def test_an_unknown_relation_is_that_checks_error(client: httpx.Client) -> None:
    who = uid()
    write(client, tuple_(who, "reader", f"sheet:{who}"))
    body = {
        "user": who,
        "checks": [
            {"relation": "reader", "object": f"sheet:{who}"},
            {"relation": "nosuch", "object": f"sheet:{who}"},
        ],
    }
    found, unknown = admin(client, "/v1/check_permissions", body)["results"]
    assert found == {"relation": "reader", "object": f"sheet:{who}", "allowed": True}
    assert unknown["allowed"] is False
    assert unknown["error"]["code"] == "invalid_argument"
    assert "nosuch" in unknown["error"]["message"]


# ---------------------------------------------------------------- list_permissions


def test_list_permissions_filters_and_order(client: httpx.Client) -> None:
    who = uid()
    write(
        client,
        tuple_(who, "viewer", f"document:{who}-b"),
        tuple_(who, "viewer", f"document:{who}-a"),
        tuple_(who, "reader", f"sheet:{who}"),
        tuple_(who, "blocked", f"document:{who}-b"),
    )
    everything = admin(client, "/v1/list_permissions", {"user": who})
    assert everything["truncated"] is False
    # Other tests' `user:*` grants reach every user: look at this test's objects only.
    everything = {
        "permissions": [p for p in everything["permissions"] if who in p["object"]],
        "objects": [o for o in everything["objects"] if who in o],
    }
    # (type, relation) pairs in order, objects in order within each pair.
    assert everything["permissions"] == [
        {"object": f"document:{who}-b", "relation": "blocked"},
        {"object": f"document:{who}-a", "relation": "can_view"},
        {"object": f"document:{who}-a", "relation": "viewer"},
        {"object": f"document:{who}-b", "relation": "viewer"},
        {"object": f"sheet:{who}", "relation": "reader"},
    ]
    assert everything["objects"] == [f"document:{who}-b", f"document:{who}-a", f"sheet:{who}"]
    only = admin(
        client,
        "/v1/list_permissions",
        {"user": who, "relation": "viewer", "object_type": "document"},
    )
    assert only["objects"] == [f"document:{who}-a", f"document:{who}-b"]
    sheets = admin(client, "/v1/list_permissions", {"user": who, "object_type": "sheet"})
    assert sheets["permissions"] == [{"object": f"sheet:{who}", "relation": "reader"}]
    by_relation = admin(client, "/v1/list_permissions", {"user": who, "relation": "blocked"})
    assert by_relation["objects"] == [f"document:{who}-b"]


def test_list_permissions_cap_is_1000(client: httpx.Client) -> None:
    who = uid()
    for start in range(0, 1000, 100):
        write(
            client,
            *(tuple_(who, "reader", f"sheet:{who}-{i:04}") for i in range(start, start + 100)),
        )
    exactly = admin(client, "/v1/list_permissions", {"user": who})
    assert len(exactly["permissions"]) == 1000
    assert exactly["truncated"] is False
    write(client, tuple_(who, "reader", f"sheet:{who}-1000"))
    over = admin(client, "/v1/list_permissions", {"user": who})
    assert len(over["permissions"]) == 1000
    assert over["truncated"] is True
    assert len(over["objects"]) == 1000


# ---------------------------------------------------------------- list_users and expand


def test_list_users_and_expand(client: httpx.Client) -> None:
    who, other = uid(), uid()
    doc = f"document:{who}"
    write(
        client,
        tuple_(who, "viewer", doc),
        tuple_(other, "editor", doc),
        tuple_(other, "member", f"group:{who}"),
    )
    users = admin(
        client,
        "/v1/admin/fga/list_users",
        {"object": doc, "relation": "can_view", "user_type": "user"},
    )
    assert users == {"users": sorted([f"user:{who}", f"user:{other}"])}
    missing = post(client, "/v1/admin/fga/list_users", {"object": doc}, headers=ADMIN)
    assert error(missing, 400, "invalid_argument") == "object, relation and user_type are required"
    tree = json.loads(
        admin(client, "/v1/admin/fga/expand", {"relation": "viewer", "object": doc})["tree"]
    )
    assert tree["root"]["name"] == f"{doc}#viewer"
    direct = tree["root"]["union"]["nodes"][0]
    assert direct["leaf"]["users"]["users"] == [f"user:{who}"]
    half = post(client, "/v1/admin/fga/expand", {"object": doc}, headers=ADMIN)
    assert error(half, 400, "invalid_argument") == "relation and object are required"


# ---------------------------------------------------------------- several processes, one store


def test_writes_through_one_process_are_seen_at_once_by_another(
    database: tuple[str, str, Path], server: ServerProcess, tmp_path: Path
) -> None:
    kind, url, _ = database
    with (
        running(server_flags(kind, url), tmp_path, name="second") as second,
        server.client() as first_client,
        second.client() as second_client,
    ):
        who = uid()
        doc = f"document:{who}"
        assert checks(second_client, who, ("viewer", doc)) == [False]
        write(first_client, tuple_(who, "viewer", doc))
        assert checks(second_client, who, ("viewer", doc)) == [True]
        admin(first_client, "/v1/admin/fga/tuples/delete", {"tuples": [tuple_(who, "viewer", doc)]})
        assert checks(second_client, who, ("viewer", doc)) == [False]
        # A model written on the second is used by the first for its very next request.
        extended = MODEL.replace(
            "type sheet\n",
            f"type note{who}\n  relations\n    define reader: [user]\n\ntype sheet\n",
        )
        model = admin(second_client, "/v1/admin/fga/model", {"dsl": extended})
        assert first_client.get("/v1/admin/fga/model", headers=ADMIN).json() == model
        write(first_client, tuple_(who, "reader", f"note{who}:1"))
        assert checks(second_client, who, ("reader", f"note{who}:1")) == [True]
        admin(first_client, "/v1/admin/fga/model", {"dsl": MODEL})


# ---------------------------------------------------------------- the engine switched off


def test_engine_off(tmp_path: Path) -> None:
    flags = server_flags("sqlite", str(tmp_path / "off.db"), "--fga-store=none")
    with running(flags, tmp_path) as srv, srv.client() as c:
        calls: list[tuple[str, dict[str, Any]]] = [
            (
                "/v1/check_permissions",
                {"user": "a", "checks": [{"relation": "r", "object": "o:1"}]},
            ),
            ("/v1/list_permissions", {"user": "a"}),
            ("/v1/admin/fga/model", {"dsl": MODEL}),
            ("/v1/admin/fga/reset", {}),
        ]
        for path, body in calls:
            response = post(c, path, body, headers=ADMIN)
            assert error(response, 400, "failed_precondition") == (
                "fga is not enabled on this server"
            ), path
        # Without a caller at all, the engine being off is still what is reported.
        anonymous = post(c, "/v1/check_permissions", {"checks": []})
        assert error(anonymous, 400, "failed_precondition") == "fga is not enabled on this server"


def test_memory_store_and_a_store_of_its_own(tmp_path: Path) -> None:
    with (
        running(
            server_flags("sqlite", str(tmp_path / "m.db"), "--fga-store=memory"),
            tmp_path,
            name="memory",
        ) as srv,
        srv.client() as c,
    ):
        admin(c, "/v1/admin/fga/model", {"dsl": MODEL})
        write(c, tuple_("ann", "reader", "sheet:1"))
        assert checks(c, "ann", ("reader", "sheet:1")) == [True]
    main, own = tmp_path / "main.db", tmp_path / "fga.db"
    flags = server_flags("sqlite", str(main), "--fga-store=sqlite", f"--fga-store-url={own}")
    with running(flags, tmp_path, name="own") as srv, srv.client() as c:
        admin(c, "/v1/admin/fga/model", {"dsl": MODEL})
        write(c, tuple_("ann", "reader", "sheet:1"))
    for path, expected in [(own, 1), (main, 0)]:
        engine = sa.create_engine(f"sqlite:///{path}")
        with engine.connect() as conn:
            count = conn.execute(sa.text("SELECT count(*) FROM service_fga_tuples")).scalar()
        engine.dispose()
        assert count == expected


def test_metrics_count_checks_and_operations(server: ServerProcess, client: httpx.Client) -> None:
    who = uid()
    write(client, tuple_(who, "reader", f"sheet:{who}"))
    checks(client, who, ("reader", f"sheet:{who}"), ("reader", f"sheet:{who}-no"))
    text = httpx.get(f"http://127.0.0.1:{server.metrics_port}/metrics").text
    lines = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("bastion_fga_")
    }
    assert lines['bastion_fga_checks_total{operation="check_permissions",result="allowed"}'] >= 1
    assert lines['bastion_fga_checks_total{operation="check_permissions",result="denied"}'] >= 1
    assert lines['bastion_fga_operations_total{operation="write_tuples",result="success"}'] >= 1
