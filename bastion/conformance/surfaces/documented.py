"""Every REST success body is checked against the schema /openapi.json documents for it.

Uses ``jsonschema_rs`` (installed with schemathesis); without it the check is off and
the suite says so once in its header line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

try:
    import jsonschema_rs as _jsonschema_rs
except ImportError:  # the check is optional; schemathesis brings the library
    _jsonschema_rs = None  # type: ignore[assignment]

jsonschema_rs: ModuleType | None = _jsonschema_rs

#: Violations reported per response (the first ones explain the rest).
MAX_PROBLEMS = 3


@dataclass
class DocumentedSchemas:
    enabled: bool
    by_route: dict[tuple[str, str], Any] = field(default_factory=dict)

    def problems(self, method: str, path: str, body: Any) -> tuple[str, ...]:
        validator = self.by_route.get((method.upper(), path))
        if validator is None:
            return ()
        errors = [
            f"{'/'.join(str(p) for p in e.instance_path) or '<body>'}: {e.message}"
            for e in validator.iter_errors(body)
        ]
        if not errors:
            return ()
        shown = "; ".join(errors[:MAX_PROBLEMS])
        more = f" (+{len(errors) - MAX_PROBLEMS} more)" if len(errors) > MAX_PROBLEMS else ""
        return (f"{method} {path}: response outside the documented schema: {shown}{more}",)


def documented_schemas(document: dict[str, Any]) -> DocumentedSchemas:
    if jsonschema_rs is None:
        return DocumentedSchemas(enabled=False)
    schemas = DocumentedSchemas(enabled=True)
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            content = operation.get("responses", {}).get("200", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            if schema is not None:
                schemas.by_route[(method.upper(), path)] = jsonschema_rs.validator_for(schema)
    return schemas
