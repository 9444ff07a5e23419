"""The import's fast path for the usual CSV file: a chunk of plain records turned into
``COPY`` text in one pass, with no :class:`~bastion.fga_files.Row` or
:class:`~bastion.core.fga.tuples.TupleKey` made for each line.

A record is *plain* when the file's columns are :data:`~bastion.fga_files.CSV_COLUMNS`
in their order (the first six, seven or eight), it has no quote, its ids have the
characters of plain ids (:mod:`bastion.fga_tuple_check`: nothing an id's own rules
refuse), its relations are names, it has no condition, and it is within the length
limits. The model's verdict on such a record depends on its shape alone, which the
:class:`~bastion.fga_tuple_check.Validator` is asked once. A chunk with any other record,
or one whose shape the model refuses, is left to the general path (``csv_rows``,
``checked``, ``copy_text``), which gives the same text for plain records and names the
problems with their lines: the fast path only ever gives what the general one would
(``tests/server/test_fga_import_parallel.py`` holds them to it). It costs about a third
of the general path's CPU a tuple (bench/RESULTS.md).
"""

from __future__ import annotations

import hashlib
import re

from bastion.core.fga.tuples import TupleKey
from bastion.core.limits import TEXT_LIMITS
from bastion.fga_files import CSV_COLUMNS
from bastion.fga_tuple_check import PLAIN_ID, PLAIN_NAME, Validator

__all__ = ["plain_copy_text", "plain_pattern"]

_USER_MAX, _OBJECT_MAX, _RELATION_MAX = (TEXT_LIMITS[n] for n in ("user", "object", "relation"))


def plain_pattern(header: list[str]) -> re.Pattern[str] | None:
    """The pattern of a plain record under ``header`` (one match a line, its six fields
    as groups), or None when the file's columns are not in the usual order."""
    names = [name.strip() for name in header]
    width = len(names)
    if width < 6 or names != list(CSV_COLUMNS[:width]):
        return None
    empty = "," * (width - 6)  # the condition's columns, empty
    name, ident = PLAIN_NAME, PLAIN_ID
    fields = rf"({name}),({ident}),((?:{name})?),({name}),({name}),({ident})"
    return re.compile(rf"^{fields}{empty}\r?$", re.MULTILINE)


def plain_copy_text(
    chunk: str, before: int, pattern: re.Pattern[str], validator: Validator
) -> tuple[str, int] | None:
    """``chunk`` (whole lines, the first the file's line ``before + 1``) as ``COPY`` text
    in the stage's columns and its tuples, when every record in it is plain and good;
    else None."""
    if '"' in chunk:
        return None
    found: list[tuple[str, str, str, str, str, str]] = pattern.findall(chunk)
    if len(found) != chunk.count("\n") + (not chunk.endswith("\n")):
        return None  # a line that is not a plain record (or an empty one)
    shapes = {(row[4], row[3], row[0], row[2]) for row in found}
    for shape in shapes:
        if not validator.knows((*shape, "")):
            user_type, user_id, user_relation, relation, object_type, object_id = next(
                row for row in found if (row[4], row[3], row[0], row[2]) == shape
            )
            user = f"{user_type}:{user_id}"
            key = TupleKey(
                f"{object_type}:{object_id}",
                relation,
                f"{user}#{user_relation}" if user_relation else user,
            )
            if validator.problem(key) is not None:
                return None
    sha256 = hashlib.sha256
    text = []
    add = text.append
    line = before
    for user_type, user_id, user_relation, relation, object_type, object_id in found:
        line += 1
        obj = f"{object_type}:{object_id}"
        user = (
            f"{user_type}:{user_id}#{user_relation}" if user_relation else f"{user_type}:{user_id}"
        )
        if len(obj) > _OBJECT_MAX or len(user) > _USER_MAX or len(relation) > _RELATION_MAX:
            return None
        if user_relation == relation and user_id == object_id and user_type == object_type:
            return None  # a userset of itself: the general path names it
        digest = sha256(f"{obj}#{relation}@{user}".encode()).hexdigest()
        add(f"{line}\t{digest}\t{object_type}\t{obj}\t{relation}\t{user}\t\\N\t\\N\n")
    return "".join(text), len(found)
