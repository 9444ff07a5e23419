"""Schemathesis (PyPI) fuzzes /openapi.json against the live server.

Checks: no 5xx (``not_a_server_error``) and no response outside the documented schema
(``response_schema_conformance``, ``status_code_conformance``). Requests carry Origin
(CSRF) and, only with --destructive, the admin header: fuzzing admin writes with random
bodies is not safe on a shared deployment. HTTPS trusts ``--tls-ca`` as the rest of the
suite does, and the run is paced like it: under ``--max-rps`` when given, and otherwise
every ``429`` is waited out (its ``Retry-After``) and the request sent again.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: The fuzz run's row in reports, beside the catalogue's.
FUZZ_ROW = "schemathesis.openapi"
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance"


@dataclass(frozen=True, slots=True)
class FuzzResult:
    ok: bool
    summary: str


def schemathesis_command() -> list[str] | None:
    local = Path(sys.executable).with_name("schemathesis")
    if local.exists():
        return [str(local)]
    found = shutil.which("schemathesis")
    return [found] if found else None


def rate_limit(max_rps: float | None) -> str:
    """schemathesis' ``--rate-limit``: the suite's ceiling (whole requests per second, or
    per minute below one a second), or ``auto``: wait out each 429's Retry-After."""
    if not max_rps:
        return "auto"
    if max_rps >= 1:
        return f"{math.floor(max_rps)}/s"
    return f"{max(1, math.floor(max_rps * 60))}/m"


def fuzz(
    base_url: str,
    *,
    admin_secret: str | None,
    max_examples: int,
    workdir: Path,
    tls_ca: Path | None = None,
    max_rps: float | None = None,
    seed: int = 1,
    timeout: float = 600,
) -> FuzzResult | None:
    """None when schemathesis is not installed (the row is skipped by name)."""
    command = schemathesis_command()
    if command is None:
        return None
    base = base_url.rstrip("/")
    args = [
        *command,
        "run",
        f"{base}/openapi.json",
        "--url",
        base,
        "--checks",
        CHECKS,
        "--phases",
        "examples,fuzzing",
        "--max-examples",
        str(max_examples),
        "--seed",
        str(seed),
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--rate-limit",
        rate_limit(max_rps),
        "--suppress-health-check",
        "all",
        "--header",
        f"Origin: {base}",
        "--exclude-path",
        "/v1/admin/fga/reset",
        # 503 by design while the optional GraphiQL bundle is not built (the page says so)
        "--exclude-path",
        "/playground",
    ]
    if tls_ca is not None:
        args += ["--tls-verify", str(tls_ca)]
    if admin_secret is not None:
        args += ["--header", f"x-service-admin-secret: {admin_secret}"]
    process = subprocess.run(  # noqa: S603 (argv of our own making, no shell)
        args, capture_output=True, text=True, timeout=timeout, cwd=workdir, check=False
    )
    output = (process.stdout + process.stderr).strip()
    if process.returncode == 0:
        last = [line for line in output.splitlines() if line.strip()]
        return FuzzResult(True, last[-1] if last else "no failures")
    return FuzzResult(False, output[-6000:])
