"""OpenFGA's server YAML tests (``consolidated_1_1_tests.yaml``, ``abac_tests.yaml``).

Each test gets one store shared by its stages: a stage writes its model as the newest,
adds its tuples, then runs its Check, ListObjects and ListUsers assertions; every returned
object or user is re-checked. As upstream does, each single-stage test with at most 100
tuples runs a second time as ``<name>_ctxTuples``: nothing stored, the stage's tuples sent
as contextual tuples with every request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bastion.conformance.openfga.report import Report
from bastion.core.fga.check import check
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.errors import FgaError
from bastion.core.fga.graph import ReverseGraph
from bastion.core.fga.list_objects import list_objects
from bastion.core.fga.list_users import UserFilter, list_users
from bastion.core.fga.request import RequestOptions
from bastion.core.fga.tuples import MemoryTupleReader, TupleKey
from bastion.core.fga.typesystem import TypeSystem

__all__ = ["count_assertions", "is_server_test_file", "run_server_tests"]

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
    ) -> None:
        self.report = report
        self.label = label
        self.ts = ts
        self.store = store
        self.extra = extra_contextual
        self.graph = ReverseGraph.build(ts)

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
            return check(self.ts, self.store, key["object"], key["relation"], key["user"], options)

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
            return list_objects(
                self.ts, self.store, req["type"], req["relation"], req["user"], options, self.graph
            ).items

        if assertion.get("errorCode"):
            return _expect_error(run, int(assertion["errorCode"]))

        def compare() -> str | None:
            got = sorted(run())
            want = sorted(assertion.get("expectation") or [])
            if got != want:
                return f"{req}: expected {want}, got {got}"
            for obj in got:
                if not check(self.ts, self.store, obj, req["relation"], req["user"], options):
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
            return list_users(
                self.ts, self.store, req["object"], req["relation"], user_filter, options
            ).items

        if assertion.get("errorCode"):
            return _expect_error(run, int(assertion["errorCode"]))

        def compare() -> str | None:
            got = sorted(run())
            want = sorted(assertion.get("expectation") or [])
            if got != want:
                return f"{req}: expected {want}, got {got}"
            for user in got:
                if not check(self.ts, self.store, req["object"], req["relation"], user, options):
                    return f"{req}: returned {user} does not check"
            return None

        return self._guard(compare)


def _run_test(report: Report, test: Mapping[str, Any], *, contextual: bool) -> None:
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
        _StageRunner(report, label, ts, store, tuples if contextual else []).run(stage)


def run_server_tests(data: Mapping[str, Any], report: Report) -> None:
    report.expected += count_assertions(data)
    for test in data["tests"]:
        _run_test(report, test, contextual=False)
        if _ctx_variant_applies(test):
            _run_test(report, test, contextual=True)
