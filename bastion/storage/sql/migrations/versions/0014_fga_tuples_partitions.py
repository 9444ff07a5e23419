"""Per-store partitions of the tuples on PostgreSQL (issue 37): ``service_fga_tuples``
becomes ``PARTITION BY LIST (store_id)``, the table as it was its ``DEFAULT`` partition
(``service_fga_tuples_default``, every store's tuples until one is imported whole). An
import into an empty store then loads a bare table, builds its indexes by sorting and
attaches it as that store's partition (storage/fga_bulk_postgres.py): a B-tree built by
sorting costs a fraction of one grown row by row in random order (bench/RESULTS.md,
"Import: a store loaded into a bare table, then its indexes").

A partitioned table's unique keys hold the partition key: the primary key becomes
``(store_id, id)``. The ids still come from one sequence. SQLite and MySQL/MariaDB keep
one table.

The tuple's parts (key hash, object type, object, relation, user) move to the "C"
collation: equality was byte for byte already; their indexes sort with ``memcmp``. The
unique key becomes ``(key_hash, store_id)``: the same key, led by the column that tells
rows apart in a store's own partition.

Not expand-only: a build of 0013 names the unique key's constraint when an import meets a
stored tuple, and a store's own partition names it otherwise.

Revision ID: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: The tuple's parts, whose indexes sort in the "C" collation (``memcmp``, not the
#: locale's ``strcoll``), with their lengths (schema.py).
_BYTEWISE = {
    "key_hash": 64,
    "object_type": 254,
    "object": 512,
    "relation": 50,
    '"user"': 512,
}
#: The unique key, the key hash first: in a store's own partition every store id is the
#: same, and a sort led by it compares both columns in full each time (no abbreviated
#: keys): its index took 26 s to build for 9.8M tuples, against 11 s led by the hash
#: (bench/RESULTS.md).
_UNIQUE = {"upgrade": "(key_hash, store_id)", "downgrade": "(store_id, key_hash)"}
#: The indexes of schema.py, by name, as (columns, predicate).
_INDEXES = {
    "ix_service_fga_tuples_object_relation": ("object, relation", ""),
    "ix_service_fga_tuples_user_object_type": ('"user", object_type', ""),
    "ix_service_fga_tuples_usersets": (
        "store_id, object, relation",
        " WHERE \"user\" LIKE '%#%'",
    ),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    old = "service_fga_tuples_default"
    op.execute(f"ALTER TABLE service_fga_tuples RENAME TO {old}")
    _collate(old, '"C"')
    for name in _INDEXES:
        op.execute(f"ALTER INDEX {name} RENAME TO {name.replace('ix_service_fga_tuples', old)}")
    op.execute(
        f"ALTER TABLE {old} DROP CONSTRAINT service_fga_tuples_pkey, "
        f"ADD CONSTRAINT {old}_pkey PRIMARY KEY (store_id, id), "
        "DROP CONSTRAINT uq_service_fga_tuples_store_key, "
        f"ADD CONSTRAINT {old}_key UNIQUE {_UNIQUE['upgrade']}"
    )
    op.execute(
        f"CREATE TABLE service_fga_tuples (LIKE {old} INCLUDING DEFAULTS) "
        "PARTITION BY LIST (store_id)"
    )
    op.execute("ALTER SEQUENCE service_fga_tuples_id_seq OWNED BY service_fga_tuples.id")
    _keys("store_id, id", _UNIQUE["upgrade"])
    # The old table's indexes match the parent's: attached as they are, nothing rebuilt.
    op.execute(f"ALTER TABLE service_fga_tuples ATTACH PARTITION {old} DEFAULT")


def _collate(table: str, collation: str) -> None:
    op.execute(
        f"ALTER TABLE {table} "
        + ", ".join(
            f"ALTER COLUMN {column} TYPE varchar({length}) COLLATE {collation}"
            for column, length in _BYTEWISE.items()
        )
    )


def _keys(primary: str, unique: str) -> None:
    op.execute(
        "ALTER TABLE service_fga_tuples ADD CONSTRAINT service_fga_tuples_pkey "
        f"PRIMARY KEY ({primary}), ADD CONSTRAINT uq_service_fga_tuples_store_key "
        f"UNIQUE {unique}"
    )
    for name, (columns, where) in _INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON service_fga_tuples ({columns}){where}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("CREATE TABLE bastion_fga_tuples_one (LIKE service_fga_tuples INCLUDING DEFAULTS)")
    op.execute("INSERT INTO bastion_fga_tuples_one SELECT * FROM service_fga_tuples ORDER BY id")
    op.execute("ALTER SEQUENCE service_fga_tuples_id_seq OWNED BY bastion_fga_tuples_one.id")
    op.execute("DROP TABLE service_fga_tuples")
    op.execute("ALTER TABLE bastion_fga_tuples_one RENAME TO service_fga_tuples")
    _collate("service_fga_tuples", '"default"')
    _keys("id", _UNIQUE["downgrade"])
