"""What a driver's error says about a statement: that it ran out of time or waited out
a lock (:func:`timed_out`), or that its transaction was chosen as a deadlock's victim
(:func:`deadlocked`), on PostgreSQL, MariaDB/MySQL and SQLite alike."""

from __future__ import annotations

from sqlalchemy import exc

__all__ = ["deadlocked", "timed_out"]

#: What each database answers when a statement ran out of time or waited out a lock:
#: PostgreSQL's SQLSTATEs (query_canceled, lock_not_available), MySQL/MariaDB's error
#: numbers (lock wait timeout, max_execution_time, max_statement_time, metadata lock).
_PG_TIMEOUTS = frozenset({"57014", "55P03"})
_MYSQL_TIMEOUTS = frozenset({1205, 3024, 1969})


def _error_code(error: exc.DBAPIError) -> str | int | None:
    """PostgreSQL's SQLSTATE or MySQL/MariaDB's error number, if the driver gave one."""
    orig = error.orig
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):  # pymysql (which also carries a SQLSTATE)
        return args[0]
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return sqlstate if isinstance(sqlstate, str) else None


def timed_out(error: exc.DBAPIError) -> bool:
    code = _error_code(error)
    if code is not None:
        return code in _PG_TIMEOUTS or code in _MYSQL_TIMEOUTS
    return isinstance(error, exc.OperationalError) and "database is locked" in str(error.orig)


def deadlocked(error: exc.DBAPIError) -> bool:
    return _error_code(error) in ("40P01", 1213)
