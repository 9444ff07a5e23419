"""OpenFGA's server YAML tests run through bastion's OpenFGA HTTP face instead of the
engine: the same assertions, counts and ``_ctxTuples`` variant as
:mod:`conformance.openfga.server_tests`, each test in a store of its own, every request
over HTTP with the pre-shared key. Models go over the wire as OpenFGA's JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from bastion.conformance.openfga.report import Report
from bastion.conformance.openfga.server_tests import _KINDS, _ctx_variant_applies, count_assertions
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.errors import ErrorCode
from bastion.core.fga.model import model_to_json

__all__ = ["run_server_tests_over_http"]

_WRITE_CHUNK = 100


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name.lower()
    except ValueError:
        return str(code)


def _user_text(user: Mapping[str, Any]) -> str:
    if "userset" in user:
        u = user["userset"]
        return f"{u['type']}:{u['id']}#{u['relation']}"
    if "wildcard" in user:
        return f"{user['wildcard']['type']}:*"
    return f"{user['object']['type']}:{user['object']['id']}"


class _Stage:
    def __init__(
        self, http: httpx.Client, store: str, report: Report, label: str, extra: list[Any]
    ) -> None:
        self.http = http
        self.path = f"/stores/{store}"
        self.report = report
        self.label = label
        self.extra = extra

    def post(self, what: str, body: dict[str, Any]) -> tuple[bool, Any]:
        """(answered, body): False with the error code name when refused."""
        # Some contexts hold infinities: sent as Python's JSON spells them, as the engine
        # runner hands them over unchanged.
        answer = self.http.post(
            f"{self.path}/{what}",
            content=json.dumps(body),
            headers={"content-type": "application/json"},
        )
        if answer.status_code == 200:
            return True, answer.json()
        return False, answer.json().get("code")

    def _common(self, assertion: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "context": assertion.get("context") or {},
            "contextual_tuples": {
                "tuple_keys": [*(assertion.get("contextualTuples") or []), *self.extra]
            },
        }

    def _outcome(self, assertion: Mapping[str, Any], answered: bool, body: Any) -> str | None:
        """None when an expected error came; a message when the wrong thing came; "" to
        go on comparing the answer."""
        if assertion.get("errorCode"):
            want = _code_name(int(assertion["errorCode"]))
            if answered:
                return f"expected error {want}, got {body}"
            return None if body == want else f"expected error {want}, got {body}"
        return "" if answered else f"unexpected error {body}"

    def check(self, key: Mapping[str, Any], assertion: Mapping[str, Any]) -> tuple[bool, Any]:
        tuple_key = {k: key[k] for k in ("user", "relation", "object")}
        return self.post("check", {"tuple_key": tuple_key, **self._common(assertion)})

    def run(self, stage: Mapping[str, Any]) -> None:
        for i, assertion in enumerate(stage.get("checkAssertions") or []):
            answered, body = self.check(assertion["tuple"], assertion)
            problem = self._outcome(assertion, answered, body)
            if problem == "":
                want = bool(assertion.get("expectation"))
                got = body["allowed"]
                problem = None if got == want else f"{assertion['tuple']}: expected {want}"
            self.report.record(f"{self.label} check[{i}]", problem)
        for i, assertion in enumerate(stage.get("listObjectsAssertions") or []):
            self.report.record(f"{self.label} listObjects[{i}]", self.list_objects(assertion))
        for i, assertion in enumerate(stage.get("listUsersAssertions") or []):
            self.report.record(f"{self.label} listUsers[{i}]", self.list_users(assertion))

    def list_objects(self, assertion: Mapping[str, Any]) -> str | None:
        req = assertion["request"]
        body = {k: req[k] for k in ("type", "relation", "user")}
        answered, found = self.post("list-objects", {**body, **self._common(assertion)})
        problem = self._outcome(assertion, answered, found)
        if problem != "":
            return problem
        objects = sorted(found["objects"])
        return self._compare(req, objects, assertion, lambda o: (req["user"], o))

    def list_users(self, assertion: Mapping[str, Any]) -> str | None:
        req = assertion["request"]
        filters = req.get("filters") or []
        if len(filters) != 1:
            return f"expected exactly one filter, got {filters}"
        user_type, _, relation = filters[0].partition("#")
        object_type, _, object_id = req["object"].partition(":")
        body = {
            "object": {"type": object_type, "id": object_id},
            "relation": req["relation"],
            "user_filters": [{"type": user_type, **({"relation": relation} if relation else {})}],
            **self._common(assertion),
        }
        body["contextual_tuples"] = body["contextual_tuples"]["tuple_keys"]
        answered, found = self.post("list-users", body)
        problem = self._outcome(assertion, answered, found)
        if problem != "":
            return problem
        users = sorted(_user_text(u) for u in found["users"])
        return self._compare(req, users, assertion, lambda u: (u, req["object"]))

    def _compare(
        self, req: Any, got: list[str], assertion: Mapping[str, Any], pair: Any
    ) -> str | None:
        want = sorted(assertion.get("expectation") or [])
        if got != want:
            return f"{req}: expected {want}, got {got}"
        for item in got:
            user, obj = pair(item)
            key = {"user": user, "relation": req["relation"], "object": obj}
            answered, body = self.check(key, assertion)
            if not answered or not body["allowed"]:
                return f"{req}: returned {item} does not check"
        return None


def _run_test(
    http: httpx.Client, report: Report, test: Mapping[str, Any], *, contextual: bool
) -> None:
    name = str(test.get("name")) + ("_ctxTuples" if contextual else "")
    created = http.post("/stores", json={"name": name[:64].ljust(3, "_")})
    created.raise_for_status()
    store = created.json()["id"]
    for index, stage in enumerate(test.get("stages") or []):
        label = f"{name} stage {index}"
        tuples = list(stage.get("tuples") or [])
        written = http.post(
            f"/stores/{store}/authorization-models",
            json=model_to_json(parse_model(stage["model"])),
        )
        if written.status_code != 201:
            count = sum(len(stage.get(kind) or []) for kind in _KINDS)
            for i in range(count):
                report.fail(f"{label} assertion {i}", f"model refused: {written.text}")
            continue
        if not contextual:
            for i in range(0, len(tuples), _WRITE_CHUNK):
                chunk = tuples[i : i + _WRITE_CHUNK]
                answer = http.post(f"/stores/{store}/write", json={"writes": {"tuple_keys": chunk}})
                if answer.status_code != 200:
                    report.fail(f"{label} write", answer.text)
        _Stage(http, store, report, label, tuples if contextual else []).run(stage)
    http.delete(f"/stores/{store}")


def run_server_tests_over_http(
    data: Mapping[str, Any], report: Report, http: httpx.Client, names: set[str] | None = None
) -> None:
    """``http`` has the face's base URL and key; ``names`` picks tests (None: all)."""
    tests = [t for t in data["tests"] if names is None or t.get("name") in names]
    report.expected += count_assertions({"tests": tests})
    for test in tests:
        _run_test(http, report, test, contextual=False)
        if _ctx_variant_applies(test):
            _run_test(http, report, test, contextual=True)
