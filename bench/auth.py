"""Authentication throughput on PostgreSQL + Redis, beside its two ceilings.

Starts one bastion server on PostgreSQL with Redis as the memory store, signs up
``--users`` accounts, then measures with wrk (Debian package ``wrk``) at 16 connections:

- ``POST /v1/login`` cycling over the accounts (every login verifies an argon2id hash,
  reads the user, writes three session entries to Redis and one transaction of audit row
  and webhook event): logins/s, p50, p99;
- ``POST /v1/validate_jwt_token`` with one access token (signature, claims, one Redis read,
  the user's SQL-side status through its one-second cache);
- ``GET /healthz`` (one PostgreSQL and one Redis ping): the HTTP ceiling;

(``--driver`` picks the PostgreSQL driver: psycopg, the default, or asyncpg) and, in this
process, the raw argon2id verify rate with the same parameters and as many
worker threads as cores (what hashing alone allows). Run:
``.venv/bin/python bench/auth.py [--seconds 10] [--users 200]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bastion.service.passwords import PasswordHasher  # noqa: E402
from tests.dbfixtures import drop_made_databases, fresh_postgres_url, fresh_redis_url  # noqa: E402
from tests.server.harness import base_flags, running  # noqa: E402

PASSWORD = "Bench!pass1"
CONNECTIONS = 16

LOGIN_SCRIPT = """
local users = {%(users)s}
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Origin"] = "%(origin)s"
request = function()
  n = n + 1
  local email = users[(n %% #users) + 1]
  local body = '{"email":"' .. email .. '","password":"%(password)s"}'
  return wrk.format(nil, nil, nil, body)
end

seen = 0
response = function(status, headers, body)
  if status ~= 200 and seen < 3 then
    seen = seen + 1
    print("non-2xx: " .. status .. " " .. body)
  end
end
"""

VALIDATE_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Origin"] = "%(origin)s"
wrk.body = '%(body)s'

seen = 0
response = function(status, headers, body)
  if status ~= 200 and seen < 3 then
    seen = seen + 1
    print("non-2xx: " .. status .. " " .. body)
  end
end
"""


def raw_verify_rate(seconds: float) -> float:
    """argon2id verifies per second, ``CONNECTIONS`` callers on a cores-wide limiter."""
    hasher = PasswordHasher()

    async def run() -> int:
        stored = await hasher.hash(PASSWORD)
        done = 0
        deadline = trio.current_time() + seconds

        async def worker() -> None:
            nonlocal done
            while trio.current_time() < deadline:
                ok, _ = await hasher.verify(stored, PASSWORD)
                assert ok
                done += 1

        async with trio.open_nursery() as nursery:
            for _ in range(CONNECTIONS):
                nursery.start_soon(worker)
        return done

    started = time.monotonic()
    count = trio.run(run)
    return count / (time.monotonic() - started)


def _wrk(url: str, seconds: int, script: Path | None) -> dict[str, float]:
    args = ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", url]
    if script is not None:
        args[1:1] = ["-s", str(script)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def latency(label: str) -> float:
        found = re.search(rf"^\s*{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        assert found, out
        value, unit = float(found.group(1)), found.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert rps, out
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    for line in sorted(set(re.findall(r"^non-2xx: .*$", out, re.M))):
        print(line[:300], file=sys.stderr)
    return {
        "rps": float(rps.group(1)),
        "p50_ms": latency("50"),
        "p99_ms": latency("99"),
        "errors": float(non2xx.group(1)) if non2xx else 0.0,
        "client_cpu_share": cpu / wall / (os.cpu_count() or 1),
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _service_cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of every PostgreSQL and Redis server process, by service."""
    totals = {"postgres": 0.0, "redis": 0.0}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            seconds = _cpu_seconds(int(entry.name))
        except (OSError, ValueError):
            continue  # gone meanwhile
        for service in totals:
            if comm.startswith(service):
                totals[service] += seconds
    return totals


def _measured(pid: int, url: str, seconds: int, script: Path | None) -> dict[str, float]:
    before, services_before = _cpu_seconds(pid), _service_cpu_seconds()
    result = _wrk(url, seconds, script)
    requests = max(result["rps"] * seconds, 1)
    result["server_cpu_ms"] = (_cpu_seconds(pid) - before) * 1000 / requests
    for service, spent in _service_cpu_seconds().items():
        result[f"{service}_cpu_ms"] = (spent - services_before[service]) * 1000 / requests
    return result


def _verify_cpu_ms(samples: int = 50) -> float:
    """Process CPU milliseconds per verify through the server's hasher (worker threads
    included), which machine load does not inflate."""
    hasher = PasswordHasher()

    async def run() -> float:
        stored = await hasher.hash(PASSWORD)
        started = time.process_time()
        for _ in range(samples):
            await hasher.verify(stored, PASSWORD)
        return (time.process_time() - started) * 1000 / samples

    return trio.run(run)


def _with_driver(url: str, driver: str) -> str:
    scheme, rest = url.split("://", 1)
    return f"{scheme.split('+', 1)[0]}+{driver}://{rest}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument(
        "--driver", choices=["psycopg", "asyncpg"], default="psycopg", help="PostgreSQL driver"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        flags = [
            *base_flags("postgres", _with_driver(fresh_postgres_url("bench-auth"), args.driver)),
            f"--memory-store-url={fresh_redis_url()}",
        ]
        flags = [f for f in flags if not f.startswith("--log-level")] + ["--log-level=error"]
        with (
            running(flags, tmp_path) as server,
            httpx.Client(base_url=server.url, headers={"origin": server.url}, timeout=60) as client,
        ):
            emails = [f"bench-{i}@example.com" for i in range(args.users)]
            for email in emails:
                body = {"email": email, "password": PASSWORD, "confirm_password": PASSWORD}
                response = client.post("/v1/signup", json=body)
                assert response.status_code == 200, response.text
            token = client.post(
                "/v1/login", json={"email": emails[0], "password": PASSWORD}
            ).json()["access_token"]
            login_lua = tmp_path / "login.lua"
            login_lua.write_text(
                LOGIN_SCRIPT
                % {
                    "users": ",".join(f'"{e}"' for e in emails),
                    "origin": server.url,
                    "password": PASSWORD,
                }
            )
            validate_lua = tmp_path / "validate.lua"
            validate_body = json.dumps({"token_type": "access_token", "token": token})
            validate_lua.write_text(VALIDATE_SCRIPT % {"origin": server.url, "body": validate_body})
            pid = server.process.pid
            results = {
                "GET /healthz (ceiling)": _measured(
                    pid, server.url + "/healthz", args.seconds, None
                ),
                "POST /v1/validate_jwt_token": _measured(
                    pid, server.url + "/v1/validate_jwt_token", args.seconds, validate_lua
                ),
            }
            raw = raw_verify_rate(args.seconds)
            results["POST /v1/login"] = _measured(
                pid, server.url + "/v1/login", args.seconds, login_lua
            )
    print(
        f"machine: {os.cpu_count()} cores; {CONNECTIONS} connections; {args.seconds}s each;"
        f" PostgreSQL driver {args.driver}"
    )
    verify_cpu = _verify_cpu_ms()
    print(
        f"{'raw argon2id verify (in process)':40s} {raw:8.1f} /s"
        f"  CPU per verify {verify_cpu:.1f} ms"
    )
    for name, r in results.items():
        print(
            f"{name:40s} {r['rps']:8.1f} req/s  p50 {r['p50_ms']:7.2f} ms"
            f"  p99 {r['p99_ms']:7.2f} ms  non-2xx {int(r['errors'])}"
            f"  client CPU {r['client_cpu_share']:.0%}  server CPU/req {r['server_cpu_ms']:.2f} ms"
        )
    logins, validates = results["POST /v1/login"]["rps"], results["POST /v1/validate_jwt_token"]
    login_cpu = results["POST /v1/login"]["server_cpu_ms"]
    ceiling = results["GET /healthz (ceiling)"]["rps"]
    print(f"logins/s vs raw verify: {logins / raw:.0%} (target >= 75%)")
    print(
        f"CPU view: one verify {verify_cpu:.1f} ms, one login {login_cpu:.1f} ms of server CPU"
        f" -> {verify_cpu / login_cpu:.0%}"
    )
    login = results["POST /v1/login"]
    print(
        f"per login, besides the server: PostgreSQL {login['postgres_cpu_ms']:.2f} ms,"
        f" Redis {login['redis_cpu_ms']:.2f} ms of CPU"
    )
    print(f"validate_jwt_token vs /healthz: {validates['rps'] / ceiling:.0%} (target >= 70%)")


if __name__ == "__main__":
    try:
        main()
    finally:
        drop_made_databases()  # what this run made, not left behind
