"""Where a server's CPU went, from py-spy's collapsed stacks (``--format raw``).

``bench/fast_path.py --profile DIR`` records one file per measure while wrk runs; this
module reads one back and answers two questions: which part of the stack (the HTTP server,
the ASGI app, the service, the engine, the Redis client, trio's scheduler...) the samples
were in, counted once per sample by the innermost bastion-or-library frame that names a
part; and which functions the samples were in themselves (self time). A sample is a
thread that was running or ready to run: with more busy threads than cores (argon2 in
threads), shares are of the threads' time, not of the CPU's. Run on its own:
``.venv/bin/python bench/profile_summary.py FILE [--top 25]``.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

#: (part, pattern on a frame's file path), first match from the innermost frame wins.
PARTS: tuple[tuple[str, str], ...] = (
    ("engine (bastion/core/fga)", r"(^|/)core/fga/"),
    ("core, other (bastion/core)", r"(^|/)core/"),
    ("Redis client (storage/memory/resp.py, hiredis)", r"(^|/)storage/memory/|hiredis"),
    ("storage, other (bastion/storage)", r"(^|/)storage/"),
    ("service (bastion/service)", r"(^|/)service/"),
    ("GraphQL / gRPC transports", r"(^|/)transports/(graphql|grpc)/"),
    ("REST app (transports/rest, Starlette)", r"(^|/)(transports/rest|starlette|anyio)/"),
    ("HTTP server (transports/http, h11)", r"(^|/)(transports/http|h11)/"),
    ("metrics (prometheus_client)", r"(^|/)prometheus_client/"),
    ("JSON (orjson/json)", r"orjson|(^|/)json/"),
    ("trio's scheduler and I/O", r"(^|/)(trio|outcome)/"),
    ("SQL (SQLAlchemy, drivers)", r"(^|/)(sqlalchemy|psycopg|pymysql)"),
)

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:]*)(?::\d+)?\)$")


def read(path: Path) -> Counter[tuple[str, ...]]:
    """Collapsed stacks: ``frame;frame;...;frame count`` per line, outermost first."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def _file(frame: str) -> str:
    match = _FRAME.match(frame)
    return match.group("file") if match else frame


def parts(stacks: Counter[tuple[str, ...]]) -> Counter[str]:
    found: Counter[str] = Counter()
    for stack, count in stacks.items():
        name = "other"
        for frame in reversed(stack):
            where = _file(frame)
            hit = next((part for part, pattern in PARTS if re.search(pattern, where)), None)
            if hit is not None:
                name = hit
                break
        found[name] += count
    return found


def own(stacks: Counter[tuple[str, ...]]) -> Counter[str]:
    found: Counter[str] = Counter()
    for stack, count in stacks.items():
        match = _FRAME.match(stack[-1])
        leaf = stack[-1] if match is None else f"{match.group('func')} ({match.group('file')})"
        found[leaf] += count
    return found


def report(path: Path, top: int = 20) -> str:
    stacks = read(path)
    total = sum(stacks.values()) or 1
    lines = [f"{path.name}: {total:,} samples", "", "| part | share |", "|---|---|"]
    lines += [f"| {name} | {100 * n / total:.1f}% |" for name, n in parts(stacks).most_common()]
    lines += ["", "| function (self) | share |", "|---|---|"]
    lines += [f"| `{name}` | {100 * n / total:.1f}% |" for name, n in own(stacks).most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(report(args.file, args.top))


if __name__ == "__main__":
    main()
