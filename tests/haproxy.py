"""A real load balancer for fleet tests: haproxy (Debian's package) round-robining HTTP
over several bastion processes on loopback, started and stopped by the test. With
``fleet_defaults`` it runs with the ``defaults`` of the fleet example
(``deploy/fleet/haproxy.cfg``: ``option forwardfor`` among them) as they are written."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from tests.server.harness import free_port

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
FLEET_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "fleet" / "haproxy.cfg"
_OWN_DEFAULTS = (
    "defaults\n    mode http\n    timeout connect 5s\n    timeout client 60s\n"
    "    timeout server 60s\n    option http-server-close\n"
)


def fleet_defaults() -> str:
    """The fleet example's ``defaults`` section as written, less its ``default-server``
    line (it resolves compose's service names, which do not exist here)."""
    lines, inside = [], False
    for line in FLEET_CONFIG.read_text().splitlines():
        if line and not line[0].isspace():
            inside = line.strip() == "defaults"
        if inside and not line.strip().startswith(("default-server", "#")):
            lines.append(line)
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def haproxy(
    backends: Sequence[int],
    directory: Path,
    port: int | None = None,
    *,
    defaults: str = _OWN_DEFAULTS,
    source: str | None = None,
) -> Iterator[int]:
    """Round robin over ``backends`` (HTTP ports on 127.0.0.1); yields the front port.
    ``source``: the loopback address haproxy connects to the backends from (so that the
    balancer's address differs from its clients')."""
    port = port or free_port()
    directory.mkdir(parents=True, exist_ok=True)
    origin = f" source {source}" if source else ""
    servers = "\n".join(
        f"    server b{i} 127.0.0.1:{backend} check inter 500{origin}"
        for i, backend in enumerate(backends)
    )
    config = directory / "haproxy.cfg"
    config.write_text(
        f"global\n    maxconn 256\n\n{defaults}\n"
        f"frontend fleet\n    bind 127.0.0.1:{port}\n    default_backend bastions\n\n"
        f"backend bastions\n    balance roundrobin\n    option httpchk GET /healthz\n{servers}\n"
    )
    with (directory / "haproxy.log").open("ab") as log:
        process = subprocess.Popen(
            [HAPROXY, "-f", str(config), "-db"], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"haproxy did not start: {(directory / 'haproxy.log').read_text()}"
                )
            time.sleep(0.1)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
