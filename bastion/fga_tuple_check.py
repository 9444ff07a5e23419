"""Tuples read from a file (:mod:`bastion.fga_files`) checked against a store's model with
the API's rules and messages, for ``bastion fga import`` and the move-in: every bad one
named by file and line, and nothing passed on once one is bad."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from bastion.core.fga.tuples import TupleKey
from bastion.fga_files import Row
from bastion.service.fga.base import _write_problem
from bastion.service.fga.engine import ActiveModel
from bastion.service.fga.openfga_input import OpenFgaError, tuple_key

__all__ = [
    "BATCH",
    "MAX_PROBLEMS",
    "PLAIN_ID",
    "PLAIN_NAME",
    "BadTuples",
    "Validator",
    "checked",
    "checked_batches",
]

#: Tuples validated and sent to the database at a time.
BATCH = 5_000
#: Bad lines named before an import gives up reading.
MAX_PROBLEMS = 20

#: A type's or a relation's name, and an id, of a *plain* tuple: ids that pass every rule
#: of the ids themselves (no ``*``, ``:``, ``#`` or blank in an id), so that whether the
#: tuple is good depends on its shape alone (also the import's fast path,
#: :mod:`bastion.fga_plain_csv`).
PLAIN_NAME = r"[\w-]+"
PLAIN_ID = r"[\w|@.+/-]+"
_PLAIN_OBJECT = re.compile(rf"{PLAIN_NAME}:{PLAIN_ID}")
_PLAIN_USER = re.compile(rf"{PLAIN_NAME}:{PLAIN_ID}(?:#{PLAIN_NAME})?")


class Validator:
    """The API's rule for a tuple (``_write_problem``), asked once per *shape* (object
    type, relation, user type and relation, condition) for the tuples whose ids are
    plain and carry no context: a file of millions of tuples has a handful of shapes.
    Anything else, and every tuple with a problem, gets the rule itself."""

    def __init__(self, model: ActiveModel) -> None:
        self._model = model
        self._good: set[tuple[str, ...]] = set()

    def knows(self, shape: tuple[str, str, str, str, str]) -> bool:
        """Whether tuples of ``shape`` (object type, relation, user type, user relation,
        condition) with plain ids were found good."""
        return shape in self._good

    def problem(self, key: TupleKey) -> str | None:
        plain = (
            not key.context
            and _PLAIN_OBJECT.fullmatch(key.object) is not None
            and _PLAIN_USER.fullmatch(key.user) is not None
            and key.user != f"{key.object}#{key.relation}"
        )
        if not plain:
            return _write_problem(self._model, key)
        user_object, _, user_relation = key.user.partition("#")
        shape = (
            key.object.partition(":")[0],
            key.relation,
            user_object.partition(":")[0],
            user_relation,
            key.condition,
        )
        if shape in self._good:
            return None
        problem = _write_problem(self._model, key)
        if problem is None:
            self._good.add(shape)
        return problem


class BadTuples(Exception):
    """Tuples the model refuses or that cannot be read: ``path:line: problem`` each, the
    first :data:`MAX_PROBLEMS`."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} bad tuple(s)")
        self.problems = problems


def checked(
    rows: Iterable[Row], validator: Validator, path: str, problems: list[str]
) -> Iterator[tuple[int, TupleKey]]:
    """The good tuples of ``rows`` with their lines, until the first bad one; the rest is
    only checked. Each problem is added to ``problems``; at :data:`MAX_PROBLEMS` of them
    the reading stops."""
    for row in rows:
        problem = row.problem
        key = row.key
        if key is not None:
            problem = validator.problem(key) or ""
        elif not problem:
            try:
                key = tuple_key(row.fields)
            except OpenFgaError as exc:
                problem = exc.message
            else:
                problem = validator.problem(key) or ""
        if problem:
            problems.append(f"{path}:{row.line}: {problem}")
            if len(problems) >= MAX_PROBLEMS:
                return
            continue
        if problems or key is None:
            continue
        yield row.line, key


def checked_batches(
    rows: Iterable[Row], model: ActiveModel, path: str
) -> Iterator[list[tuple[int, TupleKey]]]:
    """Batches of good tuples while every row so far is good; once one is not, the rest
    of the file is only checked and :class:`BadTuples` raised."""
    problems: list[str] = []
    batch: list[tuple[int, TupleKey]] = []
    for item in checked(rows, Validator(model), path, problems):
        batch.append(item)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if problems:
        raise BadTuples(problems)
    if batch:
        yield batch
