"""What bastion's h11 server costs per request, against a raw trio + h11 loop, same run.

Three servers, each in its own process, each driven by wrk (``-t1 -c16``) in turn:

- ``raw``: a bare trio + h11 loop (no limits, no timeouts, no checks) hosting
  :func:`trivial_app`, the floor for any server on these two libraries;
- ``server``: bastion's :class:`~bastion.transports.http.server.HttpServer` hosting the
  same :func:`trivial_app` (the server's own cost: the difference from ``raw``);
- ``jwks``: the whole bastion process (PostgreSQL + Redis, the real application) on
  ``GET /.well-known/jwks.json``, which reads no storage.

The figure is the server process's CPU time per request (user + system, from /proc), not
requests/s: the machine is shared, and CPU per request does not depend on how much of it
the server got. ``--trees`` measures other checkouts of bastion in the same run
(``name=path``, put first on PYTHONPATH), interleaved round by round. Run:
``.venv/bin/python bench/http_loop.py [--seconds 8] [--rounds 3] [--trees old=/tmp/a,new=.]``;
``--threads``: a bastion process's CPU thread by thread, idle and under load on jwks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

BODY = b'{"keys":[]}'


async def trivial_app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    """A fixed small JSON answer; reads nothing (the lifespan is not supported)."""
    if scope["type"] != "http":
        raise ValueError("no lifespan")
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"11")],
        }
    )
    await send({"type": "http.response.body", "body": BODY})


async def _raw_connection(stream: Any) -> None:
    """One connection of the raw loop: parse with h11, call the app, one write per answer."""
    import h11

    conn = h11.Connection(h11.SERVER)
    held: list[Any] = []  # the response's head, until its body comes
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
            continue
        if not isinstance(event, h11.Request):
            return

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                held.append(h11.Response(status_code=message["status"], headers=message["headers"]))
            else:
                data = conn.send(held.pop()) + conn.send(h11.Data(data=message["body"]))
                await stream.send_all(data + conn.send(h11.EndOfMessage()))

        path, _, query = event.target.partition(b"?")
        scope = {
            "type": "http",
            "method": event.method.decode(),
            "path": path.decode(),
            "query_string": query,
            "headers": event.headers,
        }
        await trivial_app(scope, receive, send)
        while (event := conn.next_event()) is h11.NEED_DATA:
            conn.receive_data(await stream.receive_some(65536))
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return
        conn.start_next_cycle()


async def _serve(kind: str, port: int) -> None:
    import trio

    async def raw(stream: Any) -> None:
        with contextlib.suppress(trio.BrokenResourceError):  # wrk resets them as it ends
            await _raw_connection(stream)

    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    if kind == "raw":
        await trio.serve_listeners(raw, listeners)
    from bastion.transports.http.server import HttpServer

    await HttpServer(trivial_app).serve(listeners, trio.Event())


def _start(kind: str, tree: Path) -> tuple[subprocess.Popen[bytes], str]:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "http_loop.py"), "--serve", kind, str(port)],
        env=env,
    )
    url = f"http://127.0.0.1:{port}/"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return process, url


def _thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid``, by thread name (threads of one name summed)."""
    seconds: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if task.name == str(pid):
            name = "main thread (trio)"
        fields = stat.rsplit(")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        seconds[name] = seconds.get(name, 0.0) + used
    return seconds


def threads(seconds: int, tmp: Path) -> None:
    """Where a whole bastion process's CPU goes, thread by thread: idle, then under wrk
    on jwks (gRPC's threads among them: the C core's, and the Python ``_serve`` poller,
    which has the process's name, ``bastion``)."""
    from bench.http_servers import server_flags
    from tests.server.harness import running

    with running(server_flags("h11"), tmp, name="threads") as server:
        pid = server.process.pid
        for phase in ("idle", "jwks"):
            before = _thread_cpu(pid)
            if phase == "idle":
                time.sleep(seconds)
                requests = 0
            else:
                out = subprocess.run(
                    ["wrk", "-t1", "-c16", f"-d{seconds}s", server.url + "/.well-known/jwks.json"],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                requests = int(out.split(" requests in")[0].split()[-1])
            after = _thread_cpu(pid)
            print(f"{phase}, {seconds}s" + (f", {requests} requests" if requests else ""))
            for name in sorted(after, key=lambda n: before.get(n, 0.0) - after[n]):
                used = after[name] - before.get(name, 0.0)
                per = f", {1e6 * used / requests:.1f} us/req" if requests else ""
                print(f"  {name:18s} {used:6.2f} s CPU ({used / seconds:.2%} of a core){per}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trees", default=f"this={ROOT}", help="name=path,... (bastion trees)")
    parser.add_argument("--only", default="raw,server,jwks", help="which servers to measure")
    parser.add_argument(
        "--connections", type=int, default=16, help="wrk's connections (raw and server only)"
    )
    parser.add_argument(
        "--threads", action="store_true", help="per-thread CPU of a bastion process instead"
    )
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        import trio

        trio.run(_serve, args.serve[0], int(args.serve[1]))
        return
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    sys.path.insert(0, str(ROOT))
    from bench.http_servers import JWKS, _wrk, measure

    if args.threads:
        with tempfile.TemporaryDirectory() as tmp:
            threads(args.seconds, Path(tmp))
        return

    trees = dict(item.split("=", 1) for item in args.trees.split(","))
    only = args.only.split(",")
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            runs: list[tuple[str, str]] = []
            if "raw" in only:
                runs.append(("raw loop + trivial app", "-"))
            for name in trees:
                runs += [(kind, name) for kind in ("server", "jwks") if kind in only]
            for kind, name in runs:
                tree = Path(trees.get(name, ROOT)).resolve()
                if kind == "jwks":
                    os.environ["PYTHONPATH"] = str(tree)
                    result = measure("h11", args.seconds, Path(tmp), endpoints=(JWKS,))[JWKS]
                    label = "bastion app, GET jwks"
                else:
                    serve = "raw" if kind.startswith("raw") else "server"
                    process, url = _start(serve, tree)
                    try:
                        result = _wrk(process.pid, url, args.seconds, None, args.connections)
                    finally:
                        process.terminate()
                        process.wait()
                    label = kind if serve == "raw" else "HttpServer + trivial app"
                rows.setdefault((label, name), []).append(result)
                load.append(os.getloadavg()[0])
    print(
        f"machine: {os.cpu_count()} cores; wrk -t1 -c{args.connections} (jwks: -c16),"
        f" {args.seconds}s x {args.rounds} rounds;"
        f" load average (1 min) {min(load):.2f}-{max(load):.2f}"
    )
    for (label, name), results in rows.items():
        cpu = sorted(r["cpu_ms"] for r in results)
        rps = sorted(r["rps"] for r in results)
        bad = sum(r["errors"] for r in results)
        print(
            f"{label:26s} {name:8s} server CPU {cpu[len(cpu) // 2] * 1000:6.0f} us/req"
            f" (runs {', '.join(f'{c * 1000:.0f}' for c in cpu)})"
            f"  {rps[len(rps) // 2]:7.0f} req/s  non-2xx {int(bad)}"
        )


if __name__ == "__main__":
    main()
