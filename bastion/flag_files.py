"""Reading flags: the command line and ``@FILE`` flag files, as texts keyed by flag name.

Flags are ``--name``, ``--name=VALUE`` or ``--name VALUE``; a boolean takes its value only
after ``=`` (``--enable-grpc=false``), so ``--enable-grpc false`` is refused rather than
misread. ``@FILE`` reads flags from FILE, one per line. Nothing is read from the environment.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from bastion.core.settings import (
    FLAGS_BY_NAME,
    NOSQL_ONLY_FLAGS,
    RENAMED_FLAGS,
    ConfigError,
    Flag,
    Kind,
)

__all__ = ["HelpRequested", "read_flags"]


_NO_EXTRA: Mapping[str, Flag] = {}


class HelpRequested(Exception):  # a request to print help, not a failure
    """``--help`` or ``-h`` was given."""


def read_flags(
    argv: list[str],
    *,
    extra: Mapping[str, Flag] = _NO_EXTRA,
    positionals: list[str] | None = None,
) -> dict[str, str]:
    """The flags given in ``argv`` (``@FILE`` expanded) as texts keyed by flag name.

    ``extra``: a command's own flags, known beside the server's (on the command line and in
    flag files alike). ``positionals``: where a command's arguments go; without it, an
    argument that is not a flag is refused."""
    values: dict[str, str] = {}
    given_at: dict[str, tuple[str, str]] = {}

    def store(flag: Flag, value: str | None, where: str, source: str = "") -> None:
        """``source``: the flag file it came from, "" for the command line. A later source
        overrides an earlier one (the command line a file's value: last wins); twice in one
        source is refused, as a slip."""
        if value is None:
            if flag.kind is not Kind.BOOL:
                raise ConfigError(f"{where}{flag.option} needs a value")
            value = "true"
        here = where.removesuffix(": ") or "the command line"
        if flag.name in values and given_at[flag.name][1] == source:
            first = given_at[flag.name][0]
            places = f"twice on {here}" if first == here else f"on {first} and on {here}"
            raise ConfigError(f"{flag.option} is given more than once ({places})")
        values[flag.name] = value
        given_at[flag.name] = (here, source)

    position = 0
    previous_bool = ""
    while position < len(argv):
        arg = argv[position]
        position += 1
        if arg in ("--help", "-h"):
            raise HelpRequested
        if arg.startswith("@") and len(arg) > 1:
            for name, value, where in _read_flag_file(arg[1:]):
                store(_lookup(name, where, extra), value, where, arg[1:])
            previous_bool = ""
            continue
        if not arg.startswith("--") or arg == "--":
            # Never echo the argument: it may be a secret that lost its flag.
            if previous_bool and arg.lower() in ("true", "false"):
                raise ConfigError(
                    f"write {previous_bool}={arg.lower()}: a boolean flag takes its value after '='"
                )
            if positionals is not None:
                positionals.append(arg)
                continue
            raise ConfigError(
                f"unexpected argument #{position}: bastion takes only --flag, --flag=VALUE, "
                f"--flag VALUE and @FILE"
            )
        name, equals, value = arg[2:].partition("=")
        flag = _lookup(name, "", extra)
        previous_bool = flag.option if flag.kind is Kind.BOOL and not equals else ""
        if not equals and flag.kind is not Kind.BOOL:
            if position >= len(argv):
                raise ConfigError(f"{flag.option} needs a value")
            value = argv[position]
            position += 1
        store(flag, value if equals or flag.kind is not Kind.BOOL else None, "")
    return values


def _lookup(name: str, where: str, extra: Mapping[str, Flag]) -> Flag:
    if name == "help":
        raise HelpRequested
    flag = extra.get(name) or FLAGS_BY_NAME.get(name)
    if flag is not None:
        return flag
    if name in RENAMED_FLAGS:
        replacement = RENAMED_FLAGS[name]
        if replacement is None:
            raise ConfigError(
                f"{where}--{name} is not accepted: bastion reads its configuration only from "
                f"flags (no replacement)"
            )
        raise ConfigError(f"{where}--{name} is not accepted; use --{replacement}")
    if name in NOSQL_ONLY_FLAGS:
        raise ConfigError(f"{where}--{name} is not accepted: NoSQL backends are not supported")
    known = [*extra, *FLAGS_BY_NAME]
    kebab = name.replace("_", "-")
    if kebab in known:
        raise ConfigError(f"{where}unknown flag --{name}; flag names are kebab-case: --{kebab}")
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean --{close[0]}?" if close else "see bastion --help"
    raise ConfigError(f"{where}unknown flag --{name} ({hint})")


_FILE_LINE = re.compile(r"--([^=\s]+)(.*)", re.DOTALL)


def _read_flag_file(path: str) -> Iterator[tuple[str, str | None, str]]:
    """(name, value or None, where) per flag line of a flag file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read flag file {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"flag file {path!r} is not UTF-8 text") from None
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path} line {number}: "
        match = _FILE_LINE.fullmatch(line)
        if match is None:
            raise ConfigError(f"{where}expected --flag, --flag=VALUE or --flag VALUE")
        name, rest = match.groups()
        if rest.startswith("="):
            yield name, rest[1:], where
        elif rest:
            yield name, rest.lstrip(), where
        else:
            yield name, None, where
