"""Modular models: combining module files, extend, errors with file and position."""

from __future__ import annotations

from bastion.core.fga.dsl_printer import print_model
from bastion.core.fga.model import SourceInfo
from bastion.core.fga.modules import ModuleError, combine_modules

CORE = "module core\n\ntype user\n\ntype doc\n  relations\n    define owner: [user]\n"
SHARING = (
    "module sharing\n\nextend type doc\n  relations\n"
    "    define viewer: [user with ok] or owner\n"
    "\ncondition ok(n: int) {\n  n < 3\n}\n"
)


def test_extend_adds_relations_tagged_with_their_module() -> None:
    combined = combine_modules({"sharing.fga": SHARING, "core.fga": CORE})
    assert combined.errors == []
    assert combined.model.schema_version == "1.2"
    doc = {t.name: t for t in combined.model.type_definitions}["doc"]
    assert doc.source == SourceInfo("core", "core.fga")
    assert doc.relations["owner"].source is None
    assert doc.relations["viewer"].source == SourceInfo("sharing", "sharing.fga")
    assert combined.model.conditions["ok"].source == SourceInfo("sharing", "sharing.fga")
    assert combined.modules == ["core", "sharing"]
    text = print_model(combined.model, source_comments=True)
    assert "type doc # module: core, file: core.fga\n" in text
    assert (
        "    define viewer: [user with ok] or owner # extended by: module: sharing, "
        "file: sharing.fga\n"
    ) in text


def test_errors_name_the_file_line_and_column() -> None:
    combined = combine_modules(
        {
            "core.fga": CORE,
            "plain.fga": "model\n  schema 1.1\ntype x\n",
            "bad.fga": "module bad\n\nextend type ghost\n\nextend type doc\n  relations\n"
            "    define owner: [user]\n    define sees: missing\n",
        }
    )
    assert sorted(combined.errors, key=lambda e: (e.file, e.line)) == [
        ModuleError("extended type ghost does not exist", "bad.fga", 2, 12, 17),
        ModuleError("relation owner already exists on type doc", "bad.fga", 6, 11, 16),
        ModuleError(
            "the relation `missing` does not exist.", "bad.fga", 7, 17, 24, "missing-definition"
        ),
        ModuleError("file is not a module", "plain.fga", 0, 0, 0),
    ]


def test_syntax_errors_are_reported_per_file() -> None:
    combined = combine_modules({"core.fga": CORE, "broken.fga": "module b\ntype x\n  define y\n"})
    [error] = combined.errors
    assert (error.file, error.kind, error.line) == ("broken.fga", "syntax", 2)
