"""Tuple files as OpenFGA's CLI reads them (``fga tuple write --file``) and writes them
(``fga tuple read --output-format``): CSV, JSON, JSON Lines and YAML.

- CSV: a header naming the columns in any order, ``user_type``, ``user_id``,
  ``relation``, ``object_type`` and ``object_id`` required, ``user_relation``,
  ``condition_name`` and ``condition_context`` (a JSON object) optional; an unknown column
  is refused, as ``condition_context`` without ``condition_name``.
- JSON: one array of ``{user, relation, object, condition?: {name, context?}}``.
- JSON Lines (``.jsonl``): one such object a line; blank lines are skipped.
- YAML: the same array, as YAML.

Reading streams: each format yields :class:`Row` values one at a time with the line each
starts on, so a file of millions of tuples never sits in memory as objects (JSON and YAML
hold the file's text; CSV and JSON Lines hold one line). A row that cannot be read
carries its problem instead of a tuple; the reader goes on with the next where the
format allows (a broken JSON document ends the file).
"""

from __future__ import annotations

import csv
import json
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from pathlib import PurePath
from typing import IO, Any, NamedTuple

import yaml

from bastion.core.fga.tuples import TupleKey
from bastion.core.limits import TEXT_LIMITS

__all__ = [
    "FORMATS",
    "CsvLayout",
    "Row",
    "TupleFileError",
    "TupleWriter",
    "csv_chunks",
    "csv_header",
    "csv_layout",
    "csv_rows",
    "format_of",
    "read_rows",
]

#: Format names, and the file extensions that choose them (as the CLI does).
FORMATS = ("csv", "json", "jsonl", "yaml")
_EXTENSIONS = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".yaml": "yaml", ".yml": "yaml"}
CSV_COLUMNS = (
    "user_type",
    "user_id",
    "user_relation",
    "relation",
    "object_type",
    "object_id",
    "condition_name",
    "condition_context",
)
_REQUIRED = ("user_type", "user_id", "relation", "object_type", "object_id")


class TupleFileError(Exception):
    """The file as a whole cannot be read (a bad CSV header, JSON that is not an array)."""


class Row(NamedTuple):
    """One tuple of the file: the line it starts on, and its fields as OpenFGA's
    ``TupleKey`` object (``user``, ``relation``, ``object``, ``condition``) or the tuple
    itself (``key``), or why not. A named tuple: the cheapest to make, once a tuple."""

    line: int
    fields: Mapping[str, Any] | None = None
    problem: str = ""
    #: The tuple itself, read once, when the row has no condition and passes the API's
    #: rules for a tuple key (``openfga_input.tuple_key``): a CSV file's usual row.
    key: TupleKey | None = None


def format_of(path: str, given: str = "") -> str:
    """``given`` (``--format``) or the format the file's extension names."""
    if given:
        if given not in FORMATS:
            raise TupleFileError(f"unknown format {given!r}: one of {', '.join(FORMATS)}")
        return given
    found = _EXTENSIONS.get(PurePath(path).suffix.lower())
    if found is None:
        raise TupleFileError(
            f"cannot tell the format of {path!r} from its extension "
            f"(.csv, .json, .jsonl, .yaml, .yml): give --format"
        )
    return found


def read_rows(stream: IO[str], file_format: str) -> Iterator[Row]:
    """Every tuple of ``stream`` in ``file_format``; raises :class:`TupleFileError`."""
    if file_format == "csv":
        return _read_csv(stream)
    if file_format == "jsonl":
        return _read_jsonl(stream)
    if file_format == "json":
        return _read_json(stream.read())
    return _read_yaml(stream.read())


# ---------------------------------------------------------------- CSV


class CsvLayout(NamedTuple):
    """A CSV file's columns, as its header names them."""

    #: Fields a record has.
    width: int
    #: A record (with an empty field appended) -> its fields in :data:`CSV_COLUMNS`'
    #: order; a column the file lacks reads the appended empty field (index -1).
    pick: Callable[[list[str]], tuple[str, ...]]


def csv_layout(header: list[str]) -> CsvLayout:
    """The layout a header gives; raises :class:`TupleFileError`."""
    columns: dict[str, int] = {}
    for index, raw in enumerate(header):
        name = raw.strip()
        if name not in CSV_COLUMNS:
            raise TupleFileError(
                f"line 1: unknown CSV column {name!r}; the columns are {','.join(CSV_COLUMNS)}"
            )
        columns[name] = index
    missing = [name for name in _REQUIRED if name not in columns]
    if missing:
        raise TupleFileError(f"line 1: the CSV header lacks {', '.join(missing)}")
    if "condition_context" in columns and "condition_name" not in columns:
        raise TupleFileError("line 1: condition_context needs a condition_name column")
    pick = operator.itemgetter(*(columns.get(name, -1) for name in CSV_COLUMNS))
    return CsvLayout(len(header), pick)


def csv_header(lines: Iterator[str]) -> tuple[list[str], int]:
    """The header record of a CSV file's ``lines`` and the lines it took (the rest of
    ``lines`` is the records); raises :class:`TupleFileError`."""
    reader = csv.reader(lines)
    try:
        return next(reader), reader.line_num
    except StopIteration:
        raise TupleFileError("the CSV file is empty: it needs a header line") from None


def csv_rows(lines: Iterable[str], layout: CsvLayout, before: int) -> Iterator[Row]:
    """The rows of CSV records ``lines``, the first of which is the file's line
    ``before + 1``."""
    reader = csv.reader(lines)
    width, pick = layout
    line = before
    for record in reader:
        start, line = line + 1, before + reader.line_num
        if not record:
            continue
        if len(record) != width:
            yield Row(start, problem=f"{len(record)} fields where the header has {width}")
            continue
        record.append("")
        yield _csv_row(start, *pick(record))


def csv_chunks(lines: Iterable[str], before: int, size: int) -> Iterator[tuple[int, str]]:
    """CSV records ``lines`` in chunks of about ``size`` lines, joined, each with the lines
    before it (:func:`csv_rows` reads a chunk through ``io.StringIO(chunk, newline="")``,
    which splits it into the same lines), cut only between records: not where a quoted
    field spans lines (an odd number of quotes so far). The lines are taken ``size`` at a
    time and their quotes counted once a chunk: the command's own process does this for
    every line of a large import."""
    stream = iter(lines)
    while chunk := list(islice(stream, size)):
        joined = "".join(chunk)
        if joined.count('"') % 2:  # inside a quoted field: on to its record's end
            for text in stream:
                chunk.append(text)
                if text.count('"') % 2:
                    break
            joined = "".join(chunk)
        yield before, joined
        before += len(chunk)


def _read_csv(stream: Iterable[str]) -> Iterator[Row]:
    lines = iter(stream)
    header, before = csv_header(lines)
    yield from csv_rows(lines, csv_layout(header), before)


#: The longest user, object and relation a tuple may have (``openfga_input.tuple_key``).
_USER_MAX, _OBJECT_MAX, _RELATION_MAX = (TEXT_LIMITS[n] for n in ("user", "object", "relation"))


def _csv_row(
    line: int,
    user_type: str,
    user_id: str,
    user_relation: str,
    relation: str,
    object_type: str,
    object_id: str,
    name: str,
    text: str,
) -> Row:
    user = f"{user_type}:{user_id}#{user_relation}" if user_relation else f"{user_type}:{user_id}"
    obj = f"{object_type}:{object_id}"
    if not name:
        if (
            relation
            and len(user) <= _USER_MAX
            and len(obj) <= _OBJECT_MAX
            and len(relation) <= _RELATION_MAX
        ):
            return Row(line, key=TupleKey(obj, relation, user))
        return Row(line, {"user": user, "relation": relation, "object": obj})
    fields: dict[str, Any] = {"user": user, "relation": relation, "object": obj}
    context: Any = {}
    if text:
        try:
            context = json.loads(text)
        except ValueError:
            return Row(line, problem="condition_context is not JSON")
    fields["condition"] = {"name": name, "context": context}
    return Row(line, fields)


# ---------------------------------------------------------------- JSON, JSON Lines, YAML


def _read_jsonl(stream: Iterable[str]) -> Iterator[Row]:
    for number, text in enumerate(stream, 1):
        if not text.strip():
            continue
        try:
            yield _item_row(number, json.loads(text))
        except ValueError as exc:
            yield Row(number, problem=f"not JSON: {exc}")


def _item_row(line: int, item: Any) -> Row:
    if not isinstance(item, Mapping):
        return Row(line, problem="a tuple must be an object with user, relation and object")
    return Row(line, item)


_WHITESPACE = " \t\r\n"


def _read_json(text: str) -> Iterator[Row]:
    """The array's items one by one (``raw_decode`` from each item's start), with the line
    each starts on."""
    decoder = json.JSONDecoder()
    position = _skip(text, 0)
    if not text.startswith("[", position):
        raise TupleFileError("a JSON tuple file is one array of tuples")
    position = _skip(text, position + 1)
    line, counted = 1, 0
    if text.startswith("]", position):
        return
    while True:
        line += text.count("\n", counted, position)
        counted = position
        try:
            item, position = decoder.raw_decode(text, position)
        except ValueError as exc:
            raise TupleFileError(f"line {line}: not JSON: {exc.args[0]}") from None
        yield _item_row(line, item)
        position = _skip(text, position)
        if text.startswith("]", position):
            if _skip(text, position + 1) != len(text):
                raise TupleFileError("text after the JSON array")
            return
        if not text.startswith(",", position):
            line += text.count("\n", counted, position)
            raise TupleFileError(f"line {line}: expected ',' or ']' in the JSON array")
        position = _skip(text, position + 1)


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position


def _read_yaml(text: str) -> Iterator[Row]:
    loader = yaml.CSafeLoader(text) if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return
        if not isinstance(root, yaml.SequenceNode):
            raise TupleFileError("a YAML tuple file is one list of tuples")
        for node in root.value:
            line = node.start_mark.line + 1
            try:
                item = loader.construct_object(node, deep=True)
            except yaml.YAMLError as exc:
                yield Row(line, problem=f"not a tuple: {exc}")
                continue
            yield _item_row(line, item)
    except yaml.YAMLError as exc:
        raise TupleFileError(f"not YAML: {' '.join(str(exc).split())}") from None
    finally:
        loader.dispose()


# ---------------------------------------------------------------- writing


def tuple_object(key: TupleKey) -> dict[str, Any]:
    """OpenFGA's ``TupleKey`` object of ``key``."""
    out: dict[str, Any] = {"user": key.user, "relation": key.relation, "object": key.object}
    if key.condition:
        out["condition"] = {"name": key.condition, "context": dict(key.context or {})}
    return out


class TupleWriter:
    """Writes tuples to ``out`` in a format the CLI reads back: :meth:`write` each tuple,
    then :meth:`close` (the JSON array's end)."""

    def __init__(self, out: IO[str], file_format: str) -> None:
        self._out = out
        self._format = file_format
        #: Tuples written so far.
        self.count = 0
        if file_format == "csv":
            self._csv = csv.writer(out, lineterminator="\n")
            self._csv.writerow(CSV_COLUMNS)

    def write(self, key: TupleKey) -> None:
        self.count += 1
        if self._format == "csv":
            self._csv.writerow(_csv_record(key))
        elif self._format == "jsonl":
            self._out.write(json.dumps(tuple_object(key), separators=(",", ":")) + "\n")
        elif self._format == "json":
            self._out.write("[\n  " if self.count == 1 else ",\n  ")
            self._out.write(json.dumps(tuple_object(key), separators=(",", ":")))
        else:
            self._out.write(yaml.safe_dump([tuple_object(key)], sort_keys=False))

    def close(self) -> None:
        if self._format == "json":
            self._out.write("[]\n" if self.count == 0 else "\n]\n")
        elif self._format == "yaml" and self.count == 0:
            self._out.write("[]\n")


def _csv_record(key: TupleKey) -> list[str]:
    user_object, _, user_relation = key.user.partition("#")
    user_type, _, user_id = user_object.partition(":")
    object_type, _, object_id = key.object.partition(":")
    context = ""
    if key.condition:
        context = json.dumps(dict(key.context or {}), separators=(",", ":"), sort_keys=True)
    return [
        user_type,
        user_id,
        user_relation,
        key.relation,
        object_type,
        object_id,
        key.condition,
        context,
    ]
