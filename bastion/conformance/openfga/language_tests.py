"""OpenFGA's language data (``language/tests/data``) run against :mod:`core.fga`.

* ``transformer/<case>/``: DSL -> JSON must equal the ``.json`` semantically (null, missing
  and empty are the same), and JSON -> DSL must reproduce the ``.fga`` byte for byte;
* ``dsl-syntax-validation-cases.yaml``: a case fails to parse exactly when it lists errors,
  and the first error's line matches;
* ``dsl-semantic-validation-cases.yaml`` (cases not marked ``skip``): the errors match as a
  multiset on error type, message, line and column span;
* ``json-validation-cases.yaml``: the errors match on error type and message;
* ``json-syntax-transformer-validation-cases.yaml``: JSON -> DSL fails with exactly the
  expected message, or succeeds;
* ``object-id-validation-cases.yaml``: the object-id rule accepts exactly the valid ids;
* ``transformer-module/<case>/``: the ``module/*.fga`` files combine to
  ``authorization-model.json`` (or fail with exactly ``expected_errors.json``, matched on
  message, file, line and column span); the JSON prints as ``combined.fga`` and, with
  source comments, ``combined-sourceinfo.fga``; its modules are ``expected_modules.json``.

Not run: ``fga-mod-transformer-cases.yaml`` (the fga.mod manifest) and ``stores/`` (the CLI's
store-file schema); neither is part of the engine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bastion.conformance.openfga.report import Report
from bastion.core.fga.dsl_lexer import DslSyntaxError
from bastion.core.fga.dsl_parser import parse_dsl
from bastion.core.fga.dsl_printer import UnsupportedDslError, print_model
from bastion.core.fga.model import model_from_json, model_to_json
from bastion.core.fga.modules import combine_modules, model_modules
from bastion.core.fga.tuples import is_valid_object_id
from bastion.core.fga.validation import validate_model

__all__ = [
    "handles",
    "is_module_case",
    "is_transformer_case",
    "run_file",
    "run_module_case",
    "run_transformer_case",
]


def _normalise(value: Any) -> Any:
    if isinstance(value, Mapping):
        out = {k: _normalise(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, {}, [], "")}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def is_transformer_case(path: Path) -> bool:
    return (path / "authorization-model.fga").is_file() and (
        path / "authorization-model.json"
    ).is_file()


def run_transformer_case(path: Path, report: Report) -> None:
    dsl = (path / "authorization-model.fga").read_text()
    expected_json = json.loads((path / "authorization-model.json").read_text())
    report.expected += 2
    try:
        got = model_to_json(parse_dsl(dsl).model)
        same = _normalise(got) == _normalise(expected_json)
        report.record(
            f"{path.name} dsl->json", None if same else "JSON differs from authorization-model.json"
        )
    except DslSyntaxError as exc:
        report.fail(f"{path.name} dsl->json", str(exc))
    try:
        printed = print_model(model_from_json(expected_json))
        report.record(
            f"{path.name} json->dsl",
            None if printed == dsl else "printed DSL differs from authorization-model.fga",
        )
    except (UnsupportedDslError, ValueError) as exc:
        report.fail(f"{path.name} json->dsl", str(exc))


def is_module_case(path: Path) -> bool:
    return (path / "expected_modules.json").is_file() or (
        (path / "module").is_dir() and (path / "expected_errors.json").is_file()
    )


def run_module_case(path: Path, report: Report) -> None:
    where = path.name
    module_dir = path / "module"
    if module_dir.is_dir():
        files = {f.name: f.read_text() for f in sorted(module_dir.glob("*.fga"))}
        combined = combine_modules(files)
        report.expected += 1
        errors_file = path / "expected_errors.json"
        if errors_file.is_file():
            want = sorted(
                (e["msg"], e["file"], e["line"]["start"], e["column"]["start"], e["column"]["end"])
                for e in json.loads(errors_file.read_text())
            )
            got = sorted(
                (e.message, e.file, e.line, e.column, e.end_column) for e in combined.errors
            )
            report.record(f"{where} errors", None if got == want else f"expected {want}, got {got}")
        elif combined.errors:
            report.fail(f"{where} combine", f"unexpected errors {combined.errors}")
        else:
            expected = json.loads((path / "authorization-model.json").read_text())
            same = _normalise(model_to_json(combined.model)) == _normalise(expected)
            report.record(
                f"{where} combine",
                None if same else "combined JSON differs from authorization-model.json",
            )
    model_file = path / "authorization-model.json"
    if not model_file.is_file():
        return
    model = model_from_json(json.loads(model_file.read_text()))
    for name, comments in (("combined.fga", False), ("combined-sourceinfo.fga", True)):
        if (path / name).is_file():
            report.expected += 1
            printed = print_model(model, source_comments=comments)
            report.record(
                f"{where} {name}",
                None
                if printed == (path / name).read_text()
                else f"printed DSL differs from {name}",
            )
    modules_file = path / "expected_modules.json"
    if modules_file.is_file():
        report.expected += 1
        want_modules = json.loads(modules_file.read_text())
        got_modules = model_modules(model)
        report.record(
            f"{where} modules",
            None if got_modules == want_modules else f"expected {want_modules}, got {got_modules}",
        )


def _syntax(cases: list[Mapping[str, Any]], report: Report) -> None:
    report.expected += len(cases)
    for case in cases:
        expected = case.get("expected_errors") or []
        try:
            parse_dsl(case["dsl"])
            error: DslSyntaxError | None = None
        except DslSyntaxError as exc:
            error = exc
        where = f"syntax {case['name']!r}"
        if not expected:
            report.record(where, None if error is None else f"unexpected error: {error}")
        elif error is None:
            report.fail(where, "parsed, but the case is invalid")
        else:
            line = expected[0]["line"]["start"]
            report.record(
                where,
                None
                if error.line == line
                else f"error on line {error.line}, expected line {line}: {error}",
            )


def _semantic(cases: list[Mapping[str, Any]], report: Report) -> None:
    runnable = [c for c in cases if not c.get("skip")]
    report.expected += len(runnable)
    for case in runnable:
        where = f"semantic {case['name']!r}"
        want = sorted(
            (
                e["metadata"].get("errorType", ""),
                e["msg"],
                e["line"]["start"],
                e["column"]["start"],
                e["column"]["end"],
            )
            for e in case.get("expected_errors") or []
        )
        try:
            parsed = parse_dsl(case["dsl"])
        except DslSyntaxError as exc:
            report.fail(where, f"does not parse: {exc}")
            continue
        got = sorted(
            (e.error_type, e.message, e.line, e.column, e.end_column)
            for e in validate_model(parsed.model, parsed)
        )
        report.record(where, None if got == want else f"expected {want}, got {got}")


def _json_validation(cases: list[Mapping[str, Any]], report: Report) -> None:
    report.expected += len(cases)
    for case in cases:
        want = sorted(
            (e["metadata"]["errorType"], e["msg"]) for e in case.get("expected_errors") or []
        )
        got = sorted(
            (e.error_type, e.message)
            for e in validate_model(model_from_json(json.loads(case["json"])))
        )
        report.record(
            f"json {case['name']!r}", None if got == want else f"expected {want}, got {got}"
        )


def _json_to_dsl(cases: list[Mapping[str, Any]], report: Report) -> None:
    report.expected += len(cases)
    for case in cases:
        want = case.get("error_message")
        try:
            print_model(model_from_json(json.loads(case["json"])))
            got = None
        except UnsupportedDslError as exc:
            got = str(exc)
        report.record(
            f"json->dsl {case['name']!r}",
            None if got == want else f"expected error {want!r}, got {got!r}",
        )


def _object_ids(cases: list[Mapping[str, Any]], report: Report) -> None:
    report.expected += len(cases)
    for case in cases:
        got = is_valid_object_id(str(case["object_id"]))
        report.record(
            f"object id {case['name']!r}",
            None if got == bool(case["valid"]) else f"judged valid={got}",
        )


_FILES: dict[str, Callable[[list[Mapping[str, Any]], Report], None]] = {
    "dsl-syntax-validation-cases.yaml": _syntax,
    "dsl-semantic-validation-cases.yaml": _semantic,
    "json-validation-cases.yaml": _json_validation,
    "json-syntax-transformer-validation-cases.yaml": _json_to_dsl,
    "object-id-validation-cases.yaml": _object_ids,
}


def handles(name: str) -> bool:
    return name in _FILES


def run_file(name: str, data: Any, report: Report) -> None:
    _FILES[name](list(data or []), report)
