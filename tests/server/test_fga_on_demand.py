"""The engine reads the store on demand (issue 37), on real servers, PostgreSQL and Redis.

- Exactness with the cache warm: two processes share the store; a tuple written, a tuple
  deleted and a model written through one are used by the very next check on the other,
  although the other has the reads those checks make cached (answers that were right
  before the change).
- A store larger than the cache: 20,000 tuples imported by ``bastion fga import``, a
  server with ``--fga-cache-mib 1`` answers sampled checks over the whole store as the
  engine answers over the tuples in memory, evicting to stay within its bound, and again
  after a restart (which reads no tuple before the first check).
"""

from __future__ import annotations

import random
from pathlib import Path

import httpx

from bastion.core.fga import MemoryTupleReader, TypeSystem, check, parse_model
from bastion.core.fga.tuples import TupleKey
from tests.dbfixtures import fresh_postgres_url, fresh_redis_url
from tests.server.harness import ServerProcess, base_flags, running
from tests.server.test_failover_redis import metric
from tests.server.test_fga_generation import API_KEY, STORE, admin
from tests.server.test_migrate_command import bastion

ORG = """model
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
    define parent: [folder]
    define editor: [user]
    define viewer: [user, group#member] or viewer from parent
"""
#: The same, where editors also view.
EDITORS_VIEW = ORG.replace(
    "    define editor: [user]\n    define viewer: [user, group#member] or viewer from parent\n",
    "    define editor: [user]\n"
    "    define viewer: [user, group#member] or viewer from parent or editor\n",
)


def openfga(server: ServerProcess, path: str, body: dict[str, object]) -> dict[str, object]:
    response = httpx.post(
        f"{server.url}/stores/{STORE}/{path}",
        json=body,
        headers={"authorization": f"Bearer {API_KEY}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    found: dict[str, object] = response.json()
    return found


def views(server: ServerProcess, user: str, document: str = "document:1") -> bool:
    key = {"user": user, "relation": "viewer", "object": document}
    return bool(openfga(server, "check", {"tuple_key": key})["allowed"])


def tuple_body(*keys: str) -> dict[str, object]:
    found = []
    for text in keys:
        left, _, user = text.rpartition("@")
        obj, _, relation = left.partition("#")
        found.append({"user": user, "relation": relation, "object": obj})
    return {"tuples": found}


def cache_hits(server: ServerProcess) -> float:
    return metric(server, "bastion_fga_read_cache_hits_total")


def test_a_write_a_delete_and_a_model_are_used_by_the_next_check_with_the_cache_warm(
    tmp_path: Path,
) -> None:
    flags = [
        *base_flags("postgres", fresh_postgres_url("on_demand")),
        f"--memory-store-url={fresh_redis_url()}",
        f"--openfga-api-key={API_KEY}",
    ]
    with running(flags, tmp_path, name="a") as a, running(flags, tmp_path, name="b") as b:
        admin(a, "/v1/admin/fga/model", {"dsl": ORG})
        admin(
            a,
            "/v1/admin/fga/tuples",
            tuple_body(
                "document:1#parent@folder:f",
                "folder:f#parent@folder:root",
                "folder:root#viewer@group:eng#member",
                "group:eng#member@group:core#member",
                "group:core#member@user:zoe",
            ),
        )
        # Warm b: every read of the walk from document:1 to group:core is cached there.
        assert views(b, "user:zoe")
        assert not views(b, "user:ann")
        hits = cache_hits(b)
        assert not views(b, "user:bob")  # another user: the walk's reads come from the cache
        assert cache_hits(b) > hits
        assert not views(b, "user:ann")
        # A write through a, deep in a walk b has cached (core's members, ann absent).
        admin(a, "/v1/admin/fga/tuples", tuple_body("group:core#member@user:ann"))
        assert views(b, "user:ann")
        # A delete through a, of a read b has cached (the folder's parent).
        admin(a, "/v1/admin/fga/tuples/delete", tuple_body("folder:f#parent@folder:root"))
        assert not views(b, "user:ann")
        assert not views(b, "user:zoe")
        # A model change through a: bob edits, and editors now view.
        admin(a, "/v1/admin/fga/tuples", tuple_body("document:1#editor@user:bob"))
        assert not views(b, "user:bob")
        admin(a, "/v1/admin/fga/model", {"dsl": EDITORS_VIEW})
        assert views(b, "user:bob")
        # And back through b, used on a.
        admin(b, "/v1/admin/fga/tuples", tuple_body("folder:f#parent@folder:root"))
        assert views(a, "user:zoe")


def organisation(seed: int) -> list[TupleKey]:
    """About 20,000 tuples: nested groups, a folder tree, documents in folders."""
    rng = random.Random(seed)
    tuples = [TupleKey(f"group:g{n // 4}", "member", f"group:g{n}#member") for n in range(1, 200)]
    tuples += [TupleKey(f"group:g{n % 200}", "member", f"user:u{n}") for n in range(3000)]
    tuples += [TupleKey(f"folder:f{n}", "parent", f"folder:f{n // 3}") for n in range(1, 400)]
    tuples += [
        TupleKey(f"folder:f{n}", "viewer", f"group:g{rng.randrange(1, 8)}#member")
        for n in range(1, 400, 7)
    ]
    for n in range(7000):
        tuples.append(TupleKey(f"document:d{n}", "parent", f"folder:f{rng.randrange(400)}"))
        tuples.append(TupleKey(f"document:d{n}", "viewer", f"user:u{rng.randrange(3000)}"))
    tuples += [
        TupleKey(f"document:d{rng.randrange(7000)}", "editor", f"user:u{n}") for n in range(3000)
    ]
    return sorted(set(tuples), key=str)


def csv_of(tuples: list[TupleKey]) -> str:
    lines = ["user_type,user_id,user_relation,relation,object_type,object_id"]
    for key in tuples:
        user, _, user_relation = key.user.partition("#")
        user_type, _, user_id = user.partition(":")
        object_type, _, object_id = key.object.partition(":")
        lines.append(
            f"{user_type},{user_id},{user_relation},{key.relation},{object_type},{object_id}"
        )
    return "\n".join(lines) + "\n"


def sampled_checks(
    server: ServerProcess, pairs: list[tuple[str, str]]
) -> dict[tuple[str, str], bool]:
    found = {}
    for start in range(0, len(pairs), 50):
        batch = pairs[start : start + 50]
        checks = [
            {
                "correlation_id": str(n),
                "tuple_key": {"user": user, "relation": "viewer", "object": document},
            }
            for n, (user, document) in enumerate(batch)
        ]
        result = openfga(server, "batch-check", {"checks": checks})["result"]
        assert isinstance(result, dict)
        for n, pair in enumerate(batch):
            found[pair] = result[str(n)]["allowed"]
    return found


def test_a_store_larger_than_the_cache_answers_right_before_and_after_a_restart(
    tmp_path: Path,
) -> None:
    database = fresh_postgres_url("on_demand_large")
    flags = [
        *base_flags("postgres", database),
        f"--memory-store-url={fresh_redis_url()}",
        f"--openfga-api-key={API_KEY}",
        "--fga-cache-mib=1",
    ]
    tuples = organisation(37)
    assert len(tuples) > 19_000
    (tmp_path / "org.csv").write_text(csv_of(tuples))
    rng = random.Random(7)
    pairs = [
        (f"user:u{rng.randrange(3000)}", f"document:d{rng.randrange(7000)}") for _ in range(900)
    ]
    ts = TypeSystem(parse_model(ORG))
    memory = MemoryTupleReader(tuples)
    expected = {pair: check(ts, memory, pair[1], "viewer", pair[0]) for pair in pairs}
    assert 50 < sum(expected.values()) < len(pairs)  # both answers are sampled
    with running(flags, tmp_path, name="first") as server:
        admin(server, "/v1/admin/fga/model", {"dsl": ORG})
        imported = bastion(
            "fga",
            "import",
            "--database-type=postgres",
            f"--database-url={database}",
            "org.csv",
            cwd=tmp_path,
        )
        assert imported.returncode == 0, imported.stderr
        assert sampled_checks(server, pairs) == expected
        assert metric(server, "bastion_fga_read_cache_evictions_total") > 0
        assert 0 < metric(server, "bastion_fga_read_cache_bytes") <= 1024 * 1024
    with running(flags, tmp_path, name="second") as server:
        assert metric(server, "bastion_fga_read_cache_entries") == 0  # nothing read at start
        assert sampled_checks(server, pairs) == expected
