"""CEL engines side by side on three typical OpenFGA conditions: compile time and time per
evaluation (bench/RESULTS.md, "bastion-core's dependencies").

Each engine runs in the interpreter that has it installed:

    python bench/cel_engines.py bastion        # bastion.core.fga (PYTHONPATH=checkout)
    python bench/cel_engines.py cel-python     # celpy
    python bench/cel_engines.py common-expression-language
    python bench/cel_engines.py cel-expr-python

``bastion`` is timed twice: the raw program on converted values (what the other engines
are timed on) and ``CompiledCondition.evaluate`` from the request's JSON (what a check
pays); its compile time is ``CompiledCondition`` (parse, type check, closures). Times are
medians of five runs. To compare bastion before and after a change, run the older
checkout's copy of this file with ``PYTHONPATH`` at that checkout.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

#: name -> (expression, parameters as OpenFGA declares them, the request context as JSON)
CONDITIONS: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "ip in cidr": (
        "user_ip.in_cidr(cidr)",
        {"user_ip": "ipaddress", "cidr": "string"},
        {"user_ip": "192.168.0.7", "cidr": "192.168.0.0/24"},
    ),
    "timestamp <": (
        "current_time < grant_time + grant_duration",
        {"current_time": "timestamp", "grant_time": "timestamp", "grant_duration": "duration"},
        {
            "current_time": "2023-10-11T10:30:00Z",
            "grant_time": "2023-10-11T10:00:00Z",
            "grant_duration": "1h",
        },
    ),
    "string in list": (
        'document_attributes["status"] in allowed_statuses',
        {"document_attributes": "map<string>", "allowed_statuses": "list<string>"},
        {
            "document_attributes": {"status": "published"},
            "allowed_statuses": ["draft", "review", "published"],
        },
    ),
}


def median_us(fn: Callable[[], Any], runs: int = 5, calls: int = 2000) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def native(types: dict[str, str], context: dict[str, Any]) -> dict[str, Any]:
    """The context as datetime / timedelta / str values (for the binding engines)."""
    out: dict[str, Any] = {}
    for name, value in context.items():
        if types[name] == "timestamp":
            out[name] = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif types[name] == "duration":
            out[name] = dt.timedelta(hours=1)
        else:
            out[name] = value
    return out


def in_cidr(address: Any, cidr: Any) -> bool:
    return ipaddress.ip_address(str(address)) in ipaddress.ip_network(str(cidr), strict=False)


def bastion() -> dict[str, tuple[float, float, float]]:
    from bastion.core.fga.cel_eval import Program
    from bastion.core.fga.cel_parse import parse
    from bastion.core.fga.conditions import CompiledCondition, convert_parameter
    from bastion.core.fga.model import Condition, ConditionParam

    def param(type_name: str) -> ConditionParam:
        base, _, generic = type_name.partition("<")
        args = (f"TYPE_NAME_{generic[:-1].upper()}",) if generic else ()
        return ConditionParam(f"TYPE_NAME_{base.upper()}", args)

    rows = {}
    for name, (expression, types, context) in CONDITIONS.items():
        condition = Condition("c", expression, {k: param(v) for k, v in types.items()})
        compile_us = median_us(lambda c=condition: CompiledCondition(c), calls=200)
        compiled = CompiledCondition(condition)
        program = Program(parse(expression))
        values = {k: convert_parameter(condition.parameters[k], v, k) for k, v in context.items()}
        assert program.evaluate(values) is True
        assert compiled.evaluate(context, None) is True
        raw_us = median_us(lambda p=program, v=values: p.evaluate(v))
        full_us = median_us(lambda c=compiled, x=context: c.evaluate(x, None))
        rows[name] = (compile_us, raw_us, full_us)
    return rows


def cel_python() -> dict[str, tuple[float, float, float]]:
    import celpy
    from celpy import celtypes

    functions = {
        "in_cidr": lambda a, c: celtypes.BoolType(in_cidr(a, c)),
    }
    rows = {}
    for name, (expression, types, context) in CONDITIONS.items():
        env = celpy.Environment()
        compile_us = median_us(lambda e=env, x=expression: e.program(e.compile(x)), calls=200)
        program = env.program(env.compile(expression), functions=functions)
        values = {}
        for key, value in context.items():
            if types[key] == "timestamp":
                values[key] = celtypes.TimestampType(value)
            elif types[key] == "duration":
                values[key] = celtypes.DurationType(3600)
            else:
                values[key] = celpy.json_to_cel(value)
        assert bool(program.evaluate(values)) is True
        rows[name] = (compile_us, median_us(lambda p=program, v=values: p.evaluate(v)), 0.0)
    return rows


def common_expression_language() -> dict[str, tuple[float, float, float]]:
    import cel

    rows = {}
    for name, (expression, types, context) in CONDITIONS.items():
        compile_us = median_us(lambda x=expression: cel.compile(x), calls=200)
        program = cel.compile(expression)
        ctx = cel.Context(native(types, context))
        ctx.add_function("in_cidr", in_cidr)
        assert program.execute(ctx) is True
        rows[name] = (compile_us, median_us(lambda p=program, c=ctx: p.execute(c)), 0.0)
    return rows


def cel_expr_python() -> dict[str, tuple[float, float, float]]:
    from cel_expr_python import cel

    t = cel.Type
    declared = {
        "ipaddress": t.STRING,
        "string": t.STRING,
        "timestamp": t.TIMESTAMP,
        "duration": t.DURATION,
        "map<string>": t.Map(t.STRING, t.STRING),
        "list<string>": t.List(t.STRING),
    }
    overload = cel.Overload(
        "in_cidr_string", t.BOOL, [t.STRING, t.STRING], is_member=True, impl=in_cidr
    )
    rows = {}
    for name, (expression, types, context) in CONDITIONS.items():
        env = cel.NewEnv(
            variables={k: declared[v] for k, v in types.items()},
            functions=[cel.FunctionDecl("in_cidr", [overload])],
        )
        compile_us = median_us(lambda e=env, x=expression: e.compile(x), calls=200)
        expr = env.compile(expression)
        data = native(types, context)
        assert expr.eval(data=data).value() is True
        rows[name] = (compile_us, median_us(lambda e=expr, d=data: e.eval(data=d)), 0.0)
    return rows


ENGINES = {
    "bastion": bastion,
    "cel-python": cel_python,
    "common-expression-language": common_expression_language,
    "cel-expr-python": cel_expr_python,
}

if __name__ == "__main__":
    engine = sys.argv[1]
    for condition, (compile_us, raw_us, full_us) in ENGINES[engine]().items():
        full = f", {full_us:.1f} us from JSON" if full_us else ""
        print(
            f"{engine:28} {condition:15} compile {compile_us:8.1f} us  eval {raw_us:6.1f} us{full}"
        )
