"""Flag values (strings, as the command line and flag files give them) turned into a
validated :class:`Settings`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from bastion.core.settings.declaration import Settings
from bastion.core.settings.rules import validate
from bastion.core.settings.table import FLAGS, FLAGS_BY_NAME, Flag
from bastion.core.settings.vocabulary import (
    ConfigError,
    Kind,
)

_INT = re.compile(r"-?[0-9]+")
_BOOLS: Final[Mapping[str, bool]] = {"true": True, "false": False}


def convert(flag: Flag, raw: str) -> bool | int | float | str | tuple[str, ...]:
    """Turn one flag's text into its value, or raise :class:`ConfigError`."""
    if flag.kind is Kind.BOOL:
        try:
            return _BOOLS[raw.strip().lower()]
        except KeyError:
            raise ConfigError(f"{flag.option} expects true or false, got {raw!r}") from None
    if flag.kind is Kind.INT:
        text = raw.strip()
        if not _INT.fullmatch(text):
            raise ConfigError(f"{flag.option} expects an integer, got {raw!r}")
        return int(text)
    if flag.kind is Kind.FLOAT:
        try:
            number = float(raw.strip())
        except ValueError:
            raise ConfigError(f"{flag.option} expects a number, got {raw!r}") from None
        if not math.isfinite(number):
            raise ConfigError(f"{flag.option} expects a finite number, got {raw!r}")
        return number
    if flag.kind is Kind.LIST:
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    if flag.kind is Kind.PEM and "\\n" in raw and "\n" not in raw:
        return raw.replace("\\n", "\n")
    return raw


def settings_from_flags(values: Mapping[str, str]) -> Settings:
    """Build and validate :class:`Settings` from flag texts keyed by kebab-case name.

    Only the flags present in ``values`` were given; the rest take their defaults. A
    given flag whose feature is not implemented is refused whatever its value.
    """
    unknown = [name for name in values if name not in FLAGS_BY_NAME]
    if unknown:
        raise ConfigError(f"unknown flag --{unknown[0]}")
    refused = [flag.option for flag in FLAGS if flag.name in values and not flag.implemented]
    if refused:
        raise ConfigError(f"{refused[0]} is not implemented in this build")
    kwargs: dict[str, Any] = {
        FLAGS_BY_NAME[name].attribute: convert(FLAGS_BY_NAME[name], raw)
        for name, raw in values.items()
    }
    settings = Settings(**kwargs)
    validate(settings)
    return settings
