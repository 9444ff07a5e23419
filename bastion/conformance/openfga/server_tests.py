"""OpenFGA's server YAML tests (``consolidated_1_1_tests.yaml``, ``abac_tests.yaml``).

Each test gets one store shared by its stages: a stage writes its model as the newest,
adds its tuples, then runs its Check, ListObjects and ListUsers assertions; every returned
object or user is re-checked. As upstream does, each single-stage test with at most 100
tuples runs a second time as ``<name>_ctxTuples``: nothing stored, the stage's tuples sent
as contextual tuples with every request. ``on_demand`` runs every evaluation as a server
process does, in rounds of reads through a (small) cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from bastion.conformance.openfga.report import Report
from bastion.core.fga.check import check
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.errors import FgaError
from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.list_objects import list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.on_demand import ReadCache, evaluate_from
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey, TupleReader
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["count_assertions", "is_server_test_file", "run_server_tests"]

T = TypeVar("T")

_KINDS = ("checkAssertions", "listObjectsAssertions", "listUsersAssertions")
_MAX_CONTEXTUAL = 100


def is_server_test_file(data: Any) -> bool:
    return isinstance(data, Mapping) and isinstance(data.get("tests"), list)


def _tuple(raw: Mapping[str, Any]) -> TupleKey:
    condition = raw.get("condition") or {}
    return TupleKey(
        str(raw["object"]),
        str(raw["relation"]),
        str(raw["user"]),
        str(condition.get("name") or ""),
        condition.get("context"),
    )


def _ctx_variant_applies(test: Mapping[str, Any]) -> bool:
    stages = test.get("stages") or []
    return len(stages) == 1 and len(stages[0].get("tuples") or []) <= _MAX_CONTEXTUAL


def count_assertions(data: Mapping[str, Any]) -> int:
    """Assertions the file asks for, counting the contextual-tuples variant."""
    total = 0
    for test in data["tests"]:
        runs = 2 if _ctx_variant_applies(test) else 1
        for stage in test.get("stages") or []:
            total += runs * sum(len(stage.get(kind) or []) for kind in _KINDS)
    return total


def _expect_error(outcome: Callable[[], Any], code: int) -> str | None:
    try:
        value = outcome()
    except FgaError as exc:
        if int(exc.fga_code) == code:
            return None
        return f"expected error {code}, got {int(exc.fga_code)}: {exc.message}"
    return f"expected error {code}, got {value!r}"


class _StageRunner:
    def __init__(
        self,
        report: Report,
        label: str,
        ts: TypeSystem,
        store: MemoryTupleReader,
        extra_contextual: list[TupleKey],
        cache: ReadCache | None,
    ) -> None:
        self.report = report
        self.label = label
        self.ts = ts
        self.store = store
        self.extra = extra_contextual
        self.graph = ReverseGraph.build(ts)
        self.cache = cache
        #: The stage's tuples in the cache (the store changes between stages).
        self.scope = object()

    def evaluate(self, run: Callable[[TupleReader], T]) -> T:
        """``run`` over the store: directly, or on demand (in rounds, through the cache)."""
        if self.cache is None:
            return run(self.store)
        return evaluate_from(run, self.store, self.cache, self.scope, ON_DEMAND_OBJECT_LIMIT)

    def options(self, assertion: Mapping[str, Any]) -> RequestOptions:
        own = [_tuple(t) for t in assertion.get("contextualTuples") or []]
        return RequestOptions(
            context=assertion.get("context") or {}, contextual_tuples=[*own, *self.extra]
        )

    def run(self, stage: Mapping[str, Any]) -> None:
        for i, assertion in enumerate(stage.get("checkAssertions") or []):
            self.report.record(f"{self.label} check[{i}]", self.check(assertion))
        for i, assertion in enumerate(stage.get("listObjectsAssertions") or []):
            self.report.record(f"{self.label} listObjects[{i}]", self.list_objects(assertion))
        for i, assertion in enumerate(stage.get("listUsersAssertions") or []):
            self.report.record(f"{self.label} listUsers[{i}]", self.list_users(assertion))

    def _guard(self, body: Callable[[], str | None]) -> str | None:
        try:
            return body()
        except FgaError as exc:
            return f"unexpected error {int(exc.fga_code)}: {exc.message}"

    def check(self, assertion: Mapping[str, Any]) -> str | None:
        key = assertion["tuple"]
        options = self.options(assertion)

        def run() -> bool:
            return self.evaluate(
                lambda r: check(self.ts, r, key["object"], key["relation"], key["user"], options)
            )

        if assertion.get("errorCode"):
            return _expect_error(run, int(assertion["errorCode"]))

        def compare() -> str | None:
            got = run()
            want = bool(assertion.get("expectation"))
            return None if got == want else f"{key}: expected {want}, got {got}"

        return self._guard(compare)

    def list_objects(self, assertion: Mapping[str, Any]) -> str | None:
        req = assertion["request"]
        options = self.options(assertion)

        def run() -> tuple[str, ...]:
            return self.evaluate(
                lambda r: (
                    list_objects(
                        self.ts, r, req["type"], req["relation"], req["user"], options, self.graph
                    ).items
                )
            )

        if assertion.get("errorCode"):
            return _expect_error(run, int(assertion["errorCode"]))

        def compare() -> str | None:
            got = sorted(run())
            want = sorted(assertion.get("expectation") or [])
            if got != want:
                return f"{req}: expected {want}, got {got}"
            for obj in got:
                if not self.evaluate(
                    lambda r, o=obj: check(self.ts, r, o, req["relation"], req["user"], options)
                ):
                    return f"{req}: returned {obj} does not check"
            return None

        return self._guard(compare)

    def list_users(self, assertion: Mapping[str, Any]) -> str | None:
        req = assertion["request"]
        options = self.options(assertion)
        filters = req.get("filters") or []
        if len(filters) != 1:
            return f"expected exactly one filter, got {filters}"
        user_filter = UserFilter.parse(filters[0])

        def run() -> tuple[str, ...]:
            return self.evaluate(
                lambda r: (
                    list_users(
                        self.ts, r, req["object"], req["relation"], user_filter, options
                    ).items
                )
            )

        if assertion.get("errorCode"):
            return _expect_error(run, int(assertion["errorCode"]))

        def compare() -> str | None:
            got = sorted(run())
            want = sorted(assertion.get("expectation") or [])
            if got != want:
                return f"{req}: expected {want}, got {got}"
            for user in got:
                if not self.evaluate(
                    lambda r, u=user: check(self.ts, r, req["object"], req["relation"], u, options)
                ):
                    return f"{req}: returned {user} does not check"
            return None

        return self._guard(compare)


def _run_test(
    report: Report, test: Mapping[str, Any], *, contextual: bool, cache: ReadCache | None
) -> None:
    name = str(test.get("name")) + ("_ctxTuples" if contextual else "")
    store = MemoryTupleReader()
    for index, stage in enumerate(test.get("stages") or []):
        label = f"{name} stage {index}"
        tuples = [_tuple(t) for t in stage.get("tuples") or []]
        try:
            ts = TypeSystem(parse_model(stage["model"]))
        except ValueError as exc:
            count = sum(len(stage.get(kind) or []) for kind in _KINDS)
            for i in range(count):
                report.fail(f"{label} assertion {i}", f"model does not load: {exc}")
            continue
        if not contextual:
            for key in tuples:
                store.write(key)
        extra = tuples if contextual else []
        _StageRunner(report, label, ts, store, extra, cache).run(stage)


#: The on-demand path's cache in the runner: small, so that answers are evicted too.
ON_DEMAND_CACHE_BYTES = 64 * 1024
#: Objects read whole up to this many tuples: small, so that both ways of reading an
#: object (whole, and past the limit by relation and user) run.
ON_DEMAND_OBJECT_LIMIT = 2


def run_server_tests(data: Mapping[str, Any], report: Report, *, on_demand: bool = False) -> None:
    """``on_demand``: every evaluation in rounds through a small read cache, as a server
    process reads its store (:mod:`core.fga.on_demand`); else over the store directly."""
    report.expected += count_assertions(data)
    cache = ReadCache(ON_DEMAND_CACHE_BYTES) if on_demand else None
    for test in data["tests"]:
        _run_test(report, test, contextual=False, cache=cache)
        if _ctx_variant_applies(test):
            _run_test(report, test, contextual=True, cache=cache)
