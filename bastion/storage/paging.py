"""One page of a table, newest first, with the total: the shape every admin list uses."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa


def newest_first(
    conn: sa.Connection,
    table: sa.Table,
    *,
    offset: int,
    limit: int,
    where: Sequence[sa.ColumnElement[bool]] = (),
) -> tuple[list[sa.Row[tuple[object, ...]]], int]:
    """Rows matching ``where`` ordered by creation time (then id, for a stable order), and
    how many match in all."""
    total = conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one()
    rows = conn.execute(
        sa.select(table)
        .where(*where)
        .order_by(table.c.created_at.desc(), table.c.id.desc())
        .offset(offset)
        .limit(limit)
    ).all()
    return list(rows), int(total)
