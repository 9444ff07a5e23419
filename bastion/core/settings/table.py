"""The flag table (:data:`FLAGS`), read from :class:`Settings`' declaration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Final

from bastion.core.settings.declaration import Settings
from bastion.core.settings.vocabulary import (
    NONE_SHOWN,
    NOT_IMPLEMENTED_FLAGS,
    FlagMeta,
    Group,
    Kind,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Flag:
    """One row of the flag table."""

    name: str
    attribute: str
    kind: Kind
    default: bool | int | str | tuple[str, ...]
    group: Group
    doc: str
    choices: tuple[str, ...]
    #: The default as ``--help`` shows it.
    shown_default: str

    @property
    def option(self) -> str:
        return f"--{self.name}"

    @property
    def implemented(self) -> bool:
        return self.name not in NOT_IMPLEMENTED_FLAGS


def _kind_of(default: object, pem: bool) -> Kind:
    if pem:
        return Kind.PEM
    if isinstance(default, bool):
        return Kind.BOOL
    if isinstance(default, int):
        return Kind.INT
    if isinstance(default, float):
        return Kind.FLOAT
    if isinstance(default, tuple):
        return Kind.LIST
    return Kind.TEXT


def _show(default: object) -> str:
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, tuple):
        return ",".join(default) if default else NONE_SHOWN
    if default == "":
        return NONE_SHOWN
    return str(default)


def _build_table() -> tuple[Flag, ...]:
    table = []
    for f in fields(Settings):
        meta: FlagMeta = f.metadata["flag"]
        table.append(
            Flag(
                name=f.name.replace("_", "-"),
                attribute=f.name,
                kind=_kind_of(f.default, meta.pem),
                default=f.default,  # type: ignore[arg-type]  # declared by flag_field above
                group=meta.group,
                doc=meta.doc,
                choices=meta.choices,
                shown_default=meta.shown_default or _show(f.default),
            )
        )
    return tuple(table)


#: Every flag, in declaration order.
FLAGS: Final[tuple[Flag, ...]] = _build_table()
FLAGS_BY_NAME: Final[Mapping[str, Flag]] = {flag.name: flag for flag in FLAGS}


# ------------------------------------------------------------------ values and rules
