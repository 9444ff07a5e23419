"""A large CSV file read, checked and turned into ``COPY`` text by worker processes, for
``bastion fga import`` into PostgreSQL.

Reading a tuple, checking it against the model and writing it as ``COPY`` text is about
6 µs of Python per tuple: one core's worth for the whole of a large import's first
phase, while PostgreSQL takes the text at a fraction of a core (bench/RESULTS.md). Here
the command's own process only cuts the file into chunks of lines (between records,
never inside a quoted field) and sends each worker's text on, in the file's order (the
usual file's chunks take the fast path of :mod:`bastion.fga_plain_csv`); at
most :data:`AHEAD` chunks a worker are in flight, so the file is never read ahead into
memory. The rows are checked exactly as in one process (:mod:`bastion.fga_tuple_check`):
the same problems, named by the same lines, and nothing passed on once one is bad.
"""

from __future__ import annotations

import gc
import io
import multiprocessing
import os
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.pool import AsyncResult

from bastion.fga_files import CsvLayout, csv_chunks, csv_header, csv_layout, csv_rows
from bastion.fga_plain_csv import plain_copy_text, plain_pattern
from bastion.fga_tuple_check import BATCH, MAX_PROBLEMS, BadTuples, Validator, checked
from bastion.service.fga.engine import ActiveModel
from bastion.storage.fga import StoredModel
from bastion.storage.fga_bulk_postgres import CopyText, copy_text

__all__ = [
    "AHEAD",
    "MAX_WORKERS",
    "PARALLEL_FROM",
    "copy_texts",
    "worker_count",
    "workers_for",
]

#: Files from this size on (bytes) are read by workers; a smaller one costs less than
#: the workers' start (each imports the engine: about half a second).
PARALLEL_FROM = 8 * 2**20
#: Chunks in flight per worker.
AHEAD = 8


@dataclass(frozen=True, slots=True)
class _Reader:
    """What a worker reads its chunks with."""

    validator: Validator
    layout: CsvLayout
    path: str
    #: A plain record's pattern (:mod:`bastion.fga_plain_csv`), if the columns allow one.
    plain: re.Pattern[str] | None


#: A worker's: set once by :func:`_start`.
_reader: _Reader | None = None


#: Workers at the most: each holds the engine's modules (103 MiB resident), and the
#: command's own process cuts every chunk (0.9 µs a tuple), which many workers would
#: wait on (not measured past two).
MAX_WORKERS = 8


def worker_count() -> int:
    """One worker a core this process may run on: its CPU affinity, which a container's
    cpuset narrows, not the host's count."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return workers_for(cores or 1)


def workers_for(cores: int) -> int:
    """Two at the least (one would add a process and save nothing), :data:`MAX_WORKERS`
    at the most."""
    return min(MAX_WORKERS, max(2, cores))


def copy_texts(
    lines: Iterable[str], model: StoredModel, path: str, workers: int
) -> Iterator[CopyText]:
    """The CSV file's tuples as ``COPY`` text, a chunk at a time, in the file's order;
    raises :class:`~bastion.fga_files.TupleFileError` for a bad header and
    :class:`BadTuples` at the end when any tuple is bad (no text is given after it)."""
    stream = iter(lines)
    header, before = csv_header(stream)
    csv_layout(header)  # a bad header fails here, before any worker starts
    context = multiprocessing.get_context("spawn")
    problems: list[str] = []
    with context.Pool(workers, _start, (model.id, model.dsl, header, path)) as pool:
        pending: deque[AsyncResult[tuple[str, int, list[str]]]] = deque()
        for chunk in csv_chunks(stream, before, BATCH):
            pending.append(pool.apply_async(_work, chunk))
            if len(pending) >= AHEAD * workers:
                yield from _taken(pending.popleft().get(), problems)
                if len(problems) >= MAX_PROBLEMS:
                    break
        while pending and len(problems) < MAX_PROBLEMS:
            yield from _taken(pending.popleft().get(), problems)
    if problems:
        raise BadTuples(problems[:MAX_PROBLEMS])


def _taken(result: tuple[str, int, list[str]], problems: list[str]) -> Iterator[CopyText]:
    text, count, found = result
    problems += found
    if not problems and count:
        yield CopyText(text, count)


def _start(model_id: str, dsl: str, header: list[str], path: str) -> None:
    global _reader
    model = ActiveModel.load(StoredModel(model_id, dsl))
    _reader = _Reader(Validator(model), csv_layout(header), path, plain_pattern(header))
    # What the worker imported lives as long as it does: out of the collector's passes,
    # which the rows' allocations trigger (a quarter of a chunk's CPU otherwise).
    gc.freeze()


def _work(before: int, chunk: str) -> tuple[str, int, list[str]]:
    """One chunk: its ``COPY`` text (none once a tuple is bad), its tuples, its problems."""
    reader = _reader
    assert reader is not None
    if reader.plain is not None:
        made = plain_copy_text(chunk, before, reader.plain, reader.validator)
        if made is not None:
            return made[0], made[1], []
    problems: list[str] = []
    rows = csv_rows(io.StringIO(chunk, newline=""), reader.layout, before)
    batch = list(checked(rows, reader.validator, reader.path, problems))
    return ("" if problems else copy_text(batch)), len(batch), problems
