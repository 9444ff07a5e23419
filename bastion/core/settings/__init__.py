"""bastion's configuration: the flag table, the :class:`Settings` value and its rules.

All configuration is startup flags (kebab-case); nothing is read from environment
variables, env files, the database or the cache. :class:`Settings` IS the flag table:
every attribute is one flag (``--http-port`` -> ``settings.http_port``) and carries its
group and help text as field metadata, so the CLI, its ``--help`` and any docs read the
same declaration (:data:`FLAGS`).

This package is pure: it turns flag values (strings) into a :class:`Settings` and checks
the startup rules that need no I/O (:func:`validate`). Loading PEM keys and reading
files is the CLI's job (``transports.cli``).
"""

from __future__ import annotations

from bastion.core.settings.declaration import Settings
from bastion.core.settings.reading import convert, settings_from_flags
from bastion.core.settings.rules import validate, validate_database
from bastion.core.settings.table import FLAGS, FLAGS_BY_NAME, Flag
from bastion.core.settings.vocabulary import (
    DATABASE_TYPES,
    EXIT_CONFIG,
    JWT_TYPES,
    NOSQL_ONLY_FLAGS,
    NOT_IMPLEMENTED_FLAGS,
    RENAMED_FLAGS,
    ConfigError,
    Group,
    Kind,
)

__all__ = [
    "DATABASE_TYPES",
    "EXIT_CONFIG",
    "FLAGS",
    "FLAGS_BY_NAME",
    "JWT_TYPES",
    "NOSQL_ONLY_FLAGS",
    "NOT_IMPLEMENTED_FLAGS",
    "RENAMED_FLAGS",
    "ConfigError",
    "Flag",
    "Group",
    "Kind",
    "Settings",
    "convert",
    "settings_from_flags",
    "validate",
    "validate_database",
]
