"""The ``bastion`` command: startup flags -> :class:`~core.settings.Settings` -> server.

Flags are ``--name``, ``--name=VALUE`` or ``--name VALUE``; a boolean takes its value
only after ``=`` (``--enable-grpc=false``), so ``--enable-grpc false`` is refused rather
than misread. ``@FILE`` reads flags from FILE, one per line. Nothing is read from the
environment. The flag table and the rules that need no I/O live in :mod:`core.settings`;
this module adds what does need I/O: reading flag files and TLS files, and parsing the
PEM key material with ``cryptography``.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import textwrap
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from bastion.core.settings import (
    EXIT_CONFIG,
    FLAGS,
    ConfigError,
    Flag,
    Group,
    Kind,
    Settings,
    settings_from_flags,
)
from bastion.flag_files import HelpRequested, read_flags

if TYPE_CHECKING:
    from bastion.database_command import DatabaseCommand, Invocation

__all__ = ["HelpRequested", "main", "parse_args", "read_flags", "render_help"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bastion`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--version"]:
        print(f"bastion {_version()}")
        return 0
    if args[:1] == ["migrate"]:
        return _migrate(args[1:])
    if args[:1] == ["fga"]:
        return _fga(args[1:])
    if tuple(args[:2]) in _MOVING_COMMANDS:
        return _moving(tuple(args[:2]), args[2:])
    try:
        settings = parse_args(args)
    except HelpRequested:
        sys.stdout.write(render_help())
        return 0
    except ConfigError as exc:
        print(f"bastion: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    with collector_paused():
        from bastion.workers import run_workers, worker_slot

        parent = settings.workers > 1 and worker_slot() is None
        if not parent:
            from bastion.server import run
    if parent:
        return run_workers(settings, args)
    return run(settings)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off while a command imports what it runs.

    Importing the server makes a few hundred thousand objects that live as long as the
    process and no garbage, so the full collections the allocations trigger walk them
    for nothing: with them off, a server's start costs 17-18% less CPU (bench/RESULTS.md,
    "A server's start and the CI run"). Objects are still freed by their counts.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _migrate(args: list[str]) -> int:
    with collector_paused():
        from bastion.migrate_command import MIGRATE, run_migrate

    return _database_command(MIGRATE, run_migrate, args)


def _fga(args: list[str]) -> int:
    """``bastion fga import ...`` / ``bastion fga export ...``."""
    with collector_paused():
        from bastion.fga_command import EXPORT, IMPORT, run_export, run_import

    commands = {"import": (IMPORT, run_import), "export": (EXPORT, run_export)}
    if not args or args[0] not in commands:
        print(
            "bastion fga: name a command: bastion fga import|export (--help for either)",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    command, runner = commands[args[0]]
    return _database_command(command, runner, args[1:])


#: ``bastion import authorizer``, ``bastion import users``, ``bastion export users``
_MOVING_COMMANDS = {("import", "authorizer"), ("import", "users"), ("export", "users")}


def _moving(words: tuple[str, ...], args: list[str]) -> int:
    with collector_paused():
        from bastion.moving.commands import COMMANDS, run_command

    command = COMMANDS[words]
    return _database_command(command, partial(run_command, command), args)


def _database_command(
    command: DatabaseCommand, runner: Callable[[Invocation], int], args: list[str]
) -> int:
    """A command that only opens the database: its flags parsed, its ``--help``."""
    from bastion.database_command import parse_command, render_command_help

    name = " ".join(command.words)
    try:
        invocation = parse_command(command, args)
    except HelpRequested:
        sys.stdout.write(render_command_help(command))
        return 0
    except ConfigError as exc:
        print(f"bastion {name}: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    return runner(invocation)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bastion")
    except PackageNotFoundError:
        return "0.0.0 (not installed)"


def parse_args(argv: list[str]) -> Settings:
    """Settings from command-line arguments; raises ConfigError (or HelpRequested)."""
    settings = settings_from_flags(read_flags(argv))
    _check_jwt_keys(settings)
    _check_grpc_tls(settings)
    _check_http_tls(settings)
    return settings


# ---------------------------------------------------------------- key material (I/O)

_EC_CURVES = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}
_CURVE_NAMES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}
_MIN_RSA_BITS = 2048


def _check_jwt_keys(settings: Settings) -> None:
    """RS*/ES* keys must parse, be of the algorithm's kind and form one pair."""
    if settings.is_hmac:
        return
    private = _load_private_key(settings.jwt_private_key.encode(), "--jwt-private-key")
    try:
        public = load_pem_public_key(settings.jwt_public_key.encode())
    except (ValueError, UnsupportedAlgorithm):
        raise ConfigError("--jwt-public-key is not a PEM public key") from None
    algorithm = settings.jwt_type
    if algorithm.startswith("RS"):
        for option, key in (("--jwt-private-key", private), ("--jwt-public-key", public)):
            if not isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
                raise ConfigError(
                    f"--jwt-type {algorithm} needs an RSA key, but {option} is {_describe(key)}"
                )
            if key.key_size < _MIN_RSA_BITS:
                raise ConfigError(
                    f"{option} has {key.key_size} bits; RSA keys need at least {_MIN_RSA_BITS}"
                )
    else:
        curve = _EC_CURVES[algorithm]
        for option, key in (("--jwt-private-key", private), ("--jwt-public-key", public)):
            if not isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
                raise ConfigError(
                    f"--jwt-type {algorithm} needs an EC key, but {option} is {_describe(key)}"
                )
            if key.curve.name != curve:
                raise ConfigError(
                    f"--jwt-type {algorithm} needs a {_CURVE_NAMES[curve]} key, but {option} "
                    f"is on {_CURVE_NAMES.get(key.curve.name, key.curve.name)}"
                )
    if _spki(private.public_key()) != _spki(public):
        raise ConfigError("--jwt-public-key does not match --jwt-private-key")


def _check_grpc_tls(settings: Settings) -> None:
    """The gRPC TLS files must be readable, parse, and belong together."""
    if not (settings.enable_grpc and settings.grpc_tls_cert):
        return
    _matching_pair(
        settings.grpc_tls_cert, "--grpc-tls-cert", settings.grpc_tls_key, "--grpc-tls-key"
    )


def _check_http_tls(settings: Settings) -> None:
    """The HTTP listener's TLS files: readable, parsed, and a pair."""
    if not settings.tls_cert_file:
        return
    _matching_pair(
        settings.tls_cert_file, "--tls-cert-file", settings.tls_key_file, "--tls-key-file"
    )


def _matching_pair(cert_path: str, cert_flag: str, key_path: str, key_flag: str) -> None:
    try:
        certificates = x509.load_pem_x509_certificates(_read_file(cert_path, cert_flag))
    except ValueError:
        raise ConfigError(f"{cert_flag} {cert_path!r} holds no PEM certificate") from None
    key = _load_private_key(_read_file(key_path, key_flag), key_flag)
    if _spki(certificates[0].public_key()) != _spki(key.public_key()):
        raise ConfigError(f"{key_flag} does not match the certificate of {cert_flag}")


def _read_file(path: str, option: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {option} file {path!r}: {exc.strerror}") from None


def _load_private_key(pem: bytes, option: str) -> PrivateKeyTypes:
    # Messages never quote the key.
    if b"ENCRYPTED" in pem:
        raise ConfigError(f"{option} is encrypted; give an unencrypted PEM private key")
    try:
        return load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(f"{option} is not a PEM private key") from None


def _describe(key: object) -> str:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "an RSA key"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return "an EC key"
    return f"a {type(key).__name__.lstrip('_')} key"


def _spki(public_key: PublicKeyTypes) -> bytes:
    return public_key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)


# ---------------------------------------------------------------------------- help

_METAVARS = {
    Kind.INT: "=N",
    Kind.FLOAT: "=X",
    Kind.TEXT: "=TEXT",
    Kind.LIST: "=A,B,...",
    Kind.PEM: "=PEM",
    Kind.BOOL: "[=true|false]",
}

_PREAMBLE = """\
usage: bastion [--FLAG | --FLAG=VALUE | --FLAG VALUE | @FILE] ...

Runs the bastion authentication and authorization server. All configuration is given
as flags; nothing is read from environment variables or env files.

  Booleans:  --flag means true; otherwise --flag=true or --flag=false.
  Lists:     comma-separated, e.g. --allowed-origins=https://a.example,https://b.example
  PEM keys:  the PEM text itself; on one line, write line breaks as \\n.
  @FILE:     reads flags from FILE, one per line (--flag, --flag=VALUE or --flag VALUE;
             a value may contain spaces and '='; blank lines and lines starting with #
             are ignored). Files and arguments mix; a flag given again in a later file
             or on the command line overrides the earlier value (twice in one place is
             refused).

Flags marked [not implemented in this build] belong to features that have not landed
yet: giving one, with any value, stops the server. Exit status 2 means the
configuration was refused (one line on stderr says why).
"""

_EPILOGUE = """\
not accepted:
  --database_url, --database_type, --log_level, --redis_url (v1 names; use the
  kebab-case flags, --memory-store-url for --redis_url), --env_file (no replacement),
  --twilio-* (use --sms-*), and the NoSQL backend flags --couchbase-bucket,
  --couchbase-ram-quota, --couchbase-scope, --aws-region, --aws-access-key-id,
  --aws-secret-access-key (NoSQL backends are not supported).
"""


def render_help() -> str:
    """``bastion --help``: every flag with its default, by group."""
    out = [_PREAMBLE]
    for group in Group:
        out.append(f"\n{group.value}:\n")
        for flag in FLAGS:
            if flag.group is group:
                out.append(_help_entry(flag))
    out.append("\n" + _EPILOGUE)
    return "".join(out)


def default_label(flag: Flag) -> str:
    """How ``--help`` shows a flag's default: ``required`` or ``default: VALUE``."""
    return (
        flag.shown_default if flag.shown_default == "required" else f"default: {flag.shown_default}"
    )


def _help_entry(flag: Flag) -> str:
    metavar = f"={{{'|'.join(flag.choices)}}}" if flag.choices else _METAVARS[flag.kind]
    if flag.kind is Kind.BOOL:
        metavar = _METAVARS[Kind.BOOL]
    marker = "" if flag.implemented else "  [not implemented in this build]"
    head = f"  {flag.option}{metavar}  ({default_label(flag)}){marker}\n"
    body = textwrap.fill(flag.doc, width=88, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return head + body + "\n"


if __name__ == "__main__":
    sys.exit(main())
