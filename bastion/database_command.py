"""Commands that only open the database: ``bastion migrate``, the import and export
commands.

They take the server's *database* flags, never its secrets: an operator migrates (or imports)
with a database user and a flag file of its own. The server's full flag file may be given as
it is: its other flags are known, so they are accepted and ignored (a command that needs one
of them names it in :attr:`DatabaseCommand.server_flags`); an unknown flag is refused as the
server refuses it. Each command has its own flags (``--dry-run``), which may also stand in a
flag file, its positional arguments, and its own ``--help``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bastion.core.settings import (
    FLAGS,
    ConfigError,
    Flag,
    Group,
    Kind,
    Settings,
    convert,
    validate_database,
)
from bastion.flag_files import read_flags
from bastion.storage import StorageConfig
from bastion.storage_config import storage_config

__all__ = [
    "DATABASE_FLAGS",
    "CommandFlag",
    "DatabaseCommand",
    "Invocation",
    "parse_command",
    "render_command_help",
]

#: The server flags these commands read: where the database (and the memory store, which an
#: import announces its writes through) is. ``--migrate`` is the server's own choice, and the
#: replica is only read by a serving engine.
DATABASE_FLAGS = tuple(
    flag
    for flag in FLAGS
    if flag.group is Group.DATABASE and flag.name not in ("migrate", "database-replica-url")
)


@dataclass(frozen=True, slots=True)
class CommandFlag:
    """A flag of one command (not a server flag): ``--dry-run``, ``--store ID``."""

    name: str
    doc: str
    #: ``METAVAR`` when the flag takes a value (``--store ID``), "" for a switch.
    value: str = ""

    @property
    def option(self) -> str:
        return f"--{self.name}"

    def as_flag(self) -> Flag:
        kind = Kind.TEXT if self.value else Kind.BOOL
        attribute = self.name.replace("-", "_")
        default = "" if self.value else False
        return Flag(
            name=self.name, attribute=attribute, kind=kind, default=default,
            group=Group.DATABASE, doc=self.doc, choices=(), shown_default="",
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class DatabaseCommand:
    """How a command is called: its name, what it does, its own flags and arguments."""

    #: The words after ``bastion`` (``("migrate",)``, ``("import", "users")``).
    words: tuple[str, ...]
    summary: str
    flags: tuple[CommandFlag, ...] = ()
    #: Names of the positional arguments, all required (``("FILE",)``).
    arguments: tuple[str, ...] = ()
    #: Positional arguments that may follow those, optional (``bastion fga export [FILE]``).
    optional: tuple[str, ...] = ()
    #: Server flags the command reads besides the database's (``fga-store``: where the
    #: authorization engine's store is; ``client-secret``), used as the server uses them.
    server_flags: tuple[str, ...] = ()

    def flags_read(self) -> tuple[Flag, ...]:
        """The server flags this command uses: the database's, then its own choice."""
        extra = tuple(flag for flag in FLAGS if flag.name in self.server_flags)
        return DATABASE_FLAGS + extra


@dataclass(frozen=True, slots=True)
class Invocation:
    """A parsed command line."""

    storage: StorageConfig
    #: The server flags read (the others keep their defaults).
    settings: Settings
    #: The command's own flags that were given: a switch as "true", else its value.
    options: dict[str, str]
    arguments: tuple[str, ...]
    #: The names of the server flags that were given (a default is not a choice).
    given: frozenset[str]


def parse_command(command: DatabaseCommand, argv: Sequence[str]) -> Invocation:
    """The storage to open and the command's own flags and arguments.

    Raises :class:`ConfigError` (or ``HelpRequested`` for ``--help``)."""
    own = {flag.name: flag.as_flag() for flag in command.flags}
    arguments: list[str] = []
    given = read_flags(list(argv), extra=own, positionals=arguments)
    required, optional = len(command.arguments), len(command.optional)
    if not required <= len(arguments) <= required + optional:
        expected = " ".join([*command.arguments, *(f"[{n}]" for n in command.optional)])
        words = " ".join(command.words)
        raise ConfigError(
            f"bastion {words} takes {expected or 'no arguments'}; got {len(arguments)} "
            f"argument(s) (see bastion {words} --help)"
        )
    read = command.flags_read()
    values = {f.attribute: convert(f, given[f.name]) for f in read if f.name in given}
    settings = Settings(**values)  # type: ignore[arg-type]
    validate_database(settings)
    storage = replace(storage_config(settings), run_migrations=False, check_schema=False)
    options = {name: given[name] for name in own if name in given}
    server_given = frozenset(f.name for f in read if f.name in given)
    return Invocation(storage, settings, options, tuple(arguments), server_given)


def render_command_help(command: DatabaseCommand) -> str:
    """``bastion <command> --help``: the command's own flags, then the database flags."""
    words = " ".join(command.words)
    usage = [f"usage: bastion {words}"]
    usage += [f"[{f.option}{' ' + f.value if f.value else ''}]" for f in command.flags]
    usage += ["DATABASE-FLAGS...", *command.arguments, *(f"[{n}]" for n in command.optional)]
    out = [" ".join(usage), "", textwrap.fill(command.summary, width=88), ""]
    if command.flags:
        out.append(f"{words}:")
        out += [_entry(f.option + (" " + f.value if f.value else ""), f.doc) for f in command.flags]
        out.append("")
    out.append("server flags it reads (as the server takes them; @FILE reads flags from a file):")
    out += [_entry(flag.option, flag.doc) for flag in command.flags_read()]
    out.append("")
    out.append(
        textwrap.fill(
            "The server's other flags are accepted and ignored, so the server's own flag file "
            "can be given as it is; no secret but the database's is needed.",
            width=88,
        )
    )
    return "\n".join(out) + "\n"


def _entry(head: str, doc: str) -> str:
    body = textwrap.fill(doc, width=88, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return f"  {head}\n{body}"
