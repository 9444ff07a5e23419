"""The container's HEALTHCHECK: ``python -m bastion.health_probe [--pid N]``.

Reads the flags of the running server (process 1 in the container, or ``--pid``) from
``/proc/N/cmdline``, flag files included, so the probe follows ``--http-port``, ``--host``
and TLS (``--tls-cert-file``) as they were given, and asks ``/healthz`` on that listener.
Exit status 0 when it answers 200, 1 otherwise (one line on stderr says why).
"""

from __future__ import annotations

import argparse
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

from bastion.cli import parse_args
from bastion.core.networks import authority
from bastion.core.settings import ConfigError, Settings

#: Seconds to wait for the answer (the HEALTHCHECK's own --timeout is 5 s).
TIMEOUT = 4.0


def server_arguments(pid: int) -> list[str]:
    """The arguments after the ``bastion`` program in process ``pid``'s command line
    (``bastion ARGS``, ``python /usr/local/bin/bastion ARGS`` or ``python -m bastion ARGS``)."""
    words = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    for index, word in enumerate(words):
        if word == "bastion" or word.endswith("/bastion"):
            return words[index + 1 :]
    raise ValueError(f"process {pid} is not a bastion server: {' '.join(words[:2])}")


def healthz_url(settings: Settings) -> str:
    scheme = "https" if settings.tls_cert_file else "http"
    host = settings.host if settings.host not in ("", "0.0.0.0", "::") else "127.0.0.1"  # noqa: S104
    return f"{scheme}://{authority(host, settings.http_port)}/healthz"


def probe(pid: int) -> str | None:
    """None when the server answers; else why not."""
    try:
        url = healthz_url(parse_args(server_arguments(pid)))
    except (OSError, ValueError, ConfigError) as exc:
        return f"cannot read the server's flags: {exc}"
    # The server's own certificate on its own address: reached, not authenticated.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT, context=context) as answer:  # noqa: S310
            status = answer.status
    except (OSError, urllib.error.URLError) as exc:
        return f"{url}: {exc}"
    return None if status == 200 else f"{url}: status {status}"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bastion.health_probe")
    parser.add_argument("--pid", type=int, default=1, help="the server's process (default 1)")
    failure = probe(parser.parse_args().pid)
    if failure is not None:
        print(f"bastion health probe: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
