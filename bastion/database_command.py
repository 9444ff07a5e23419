"""Commands that only open the database: ``bastion migrate`` (and any other command that
reads or writes the database without serving).

They take the server's *database* flags, never its secrets: an operator migrates (or imports)
with a database user and a flag file of its own. The server's full flag file may be given as
it is: its other flags are known, so they are accepted and ignored; an unknown flag is refused
as the server refuses it. Each command has its own flags (``--dry-run``) and positional
arguments, and its own ``--help``.
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


@dataclass(frozen=True, slots=True)
class DatabaseCommand:
    """How a command is called: its name, what it does, its own flags and arguments."""

    #: The words after ``bastion`` (``("migrate",)``, ``("fga", "import")``).
    words: tuple[str, ...]
    summary: str
    flags: tuple[CommandFlag, ...] = ()
    #: Names of the positional arguments, all required (``("FILE",)``).
    arguments: tuple[str, ...] = ()
    #: Positional arguments that may follow those, optional (``bastion fga export [FILE]``).
    optional: tuple[str, ...] = ()
    #: Server flags the command reads besides the database's (``fga-store``: where the
    #: authorization engine's store is), accepted and used as the server uses them.
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


def parse_command(command: DatabaseCommand, argv: Sequence[str]) -> Invocation:
    """The storage to open and the command's own flags and arguments.

    Raises :class:`ConfigError` (or ``HelpRequested`` for ``--help``)."""
    own = {flag.option: flag for flag in command.flags}
    options: dict[str, str] = {}
    arguments: list[str] = []
    server_args: list[str] = []
    words = list(argv)
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        name, equals, value = word.partition("=")
        flag = own.get(name)
        if flag is not None:
            if name.removeprefix("--") in options:
                raise ConfigError(f"{flag.option} is given more than once")
            if flag.value and not equals:
                if position >= len(words):
                    raise ConfigError(f"{flag.option} needs a value ({flag.value})")
                value = words[position]
                position += 1
            elif not flag.value and equals:
                raise ConfigError(f"{flag.option} takes no value")
            options[flag.name] = value if flag.value else "true"
        elif word.startswith(("--", "-h", "@")):
            server_args.append(word)
            # a server flag's value that follows it (``--database-url PATH``)
            known = next((f for f in FLAGS if f.option == name), None)
            if known and not equals and known.kind is not Kind.BOOL and position < len(words):
                server_args.append(words[position])
                position += 1
        else:
            arguments.append(word)
    given = read_flags(server_args)
    if (
        not len(command.arguments)
        <= len(arguments)
        <= len(command.arguments) + len(command.optional)
    ):
        expected = (
            " ".join([*command.arguments, *(f"[{name}]" for name in command.optional)])
            or "no arguments"
        )
        raise ConfigError(
            f"bastion {' '.join(command.words)} takes {expected}; got {len(arguments)} "
            f"argument(s) (see bastion {' '.join(command.words)} --help)"
        )
    values = {
        flag.attribute: convert(flag, given[flag.name])
        for flag in command.flags_read()
        if flag.name in given
    }
    settings = Settings(**values)  # type: ignore[arg-type]
    validate_database(settings)
    storage = replace(storage_config(settings), run_migrations=False, check_schema=False)
    return Invocation(storage, settings, options, tuple(arguments))


def render_command_help(command: DatabaseCommand) -> str:
    """``bastion <command> --help``: the command's own flags, then the database flags."""
    words = " ".join(command.words)
    head = " ".join(
        [f"usage: bastion {words}", *(f"[{f.option}{' ' + f.value if f.value else ''}]"
                                      for f in command.flags), "DATABASE-FLAGS...",
         *command.arguments, *(f"[{name}]" for name in command.optional)]
    )  # fmt: skip
    out = [head, "", textwrap.fill(command.summary, width=88), ""]
    if command.flags:
        out.append(f"{words}:")
        for flag in command.flags:
            out.append(f"  {flag.option}{' ' + flag.value if flag.value else ''}")
            out.append(textwrap.fill(flag.doc, width=88, initial_indent=" " * 6,
                                     subsequent_indent=" " * 6))  # fmt: skip
        out.append("")
    out.append("database flags (as the server takes them; @FILE reads flags from a file):")
    for server_flag in command.flags_read():
        out.append(f"  {server_flag.option}")
        out.append(
            textwrap.fill(
                server_flag.doc, width=88, initial_indent=" " * 6, subsequent_indent=" " * 6
            )
        )
    out.append("")
    out.append(
        textwrap.fill(
            "The server's other flags are accepted and ignored, so the server's own flag file "
            "can be given as it is; no secret but the database's is needed.",
            width=88,
        )
    )
    return "\n".join(out) + "\n"
