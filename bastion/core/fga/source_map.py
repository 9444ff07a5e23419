"""Where each type, relation and condition of a model was written (file, 0-based line).

One DSL file gives a map with the file name ``""``; a modular model merges the maps of its
files. Validation uses it to point errors at the source text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bastion.core.fga.dsl_parser import ParsedDsl

__all__ = ["Loc", "SourceMap"]

Loc = tuple[str, int]


@dataclass
class SourceMap:
    lines: dict[str, list[str]] = field(default_factory=dict)
    types: dict[str, Loc] = field(default_factory=dict)
    relations: dict[tuple[str, str], Loc] = field(default_factory=dict)
    conditions: dict[str, Loc] = field(default_factory=dict)
    #: where the schema version was written, and its column
    schema: tuple[Loc, int] | None = None
    #: a lone ``module`` file validated as if it were a whole model
    module_file: bool = False

    @classmethod
    def of(cls, parsed: ParsedDsl, file: str = "") -> SourceMap:
        line, column = parsed.schema_position
        return cls(
            lines={file: parsed.lines},
            types={name: (file, n) for name, n in parsed.type_lines.items()},
            relations={key: (file, n) for key, n in parsed.relation_lines.items()},
            conditions={name: (file, n) for name, n in parsed.condition_lines.items()},
            schema=((file, line), column),
            module_file=parsed.module is not None,
        )

    def text(self, loc: Loc) -> str:
        lines = self.lines.get(loc[0], [])
        return lines[loc[1]] if 0 <= loc[1] < len(lines) else ""
