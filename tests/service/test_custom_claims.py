"""The custom access-token script in V8: forms, limits, errors, isolation, concurrency."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.lowlevel

from bastion.service.custom_claims import CustomClaimsScript

USER: dict[str, Any] = {"id": "u-1", "email": "ada@example.com", "roles": ["user"], "age": 36}
PAYLOAD: dict[str, Any] = {"sub": "u-1", "roles": ["user"], "iat": 1700000000}
LOGGER = "bastion.custom_claims"


def failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.__dict__["failure"] for r in caplog.records if r.name == LOGGER]


@pytest.mark.parametrize(
    "source",
    [
        # Authorizer's spelling: a function expression
        "function (user, tokenPayload) {\n"
        "  return {email: user.email, first_role: tokenPayload.roles[0], n: user.age + 1};\n}",
        "function customFunction(user, tokenPayload) {"
        " return {email: user.email, first_role: tokenPayload.roles[0], n: user.age + 1}; }",
        "(user, tokenPayload) => ({email: user.email, first_role: tokenPayload.roles[0],"
        " n: user.age + 1}) // a trailing comment",
        # a function body
        "return {email: user.email, first_role: tokenPayload.roles[0], n: user.age + 1};",
        "function plusOne(x) { return x + 1; }\n"
        "function customFunction(user, tokenPayload) {\n"
        "  return {email: user.email, first_role: tokenPayload.roles[0], n: plusOne(user.age)};\n}",
    ],
)
async def test_each_accepted_spelling_returns_the_objects_keys(source: str) -> None:
    script = CustomClaimsScript(source)
    assert await script.claims(USER, PAYLOAD) == {
        "email": "ada@example.com",
        "first_role": "user",
        "n": 37,
    }


async def test_nested_values_come_back_as_json() -> None:
    script = CustomClaimsScript(
        "return {org: {id: 7, tags: ['a', 'b']}, ok: true, none: null, ratio: 0.5}"
    )
    assert await script.claims(USER, PAYLOAD) == {
        "org": {"id": 7, "tags": ["a", "b"]},
        "ok": True,
        "none": None,
        "ratio": 0.5,
    }


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("function (user { return {} }", "does not compile: as a function: SyntaxError"),
        ("return {", "does not compile"),
        ("42", "the expression is not a function"),
        ("({a: 1})", "the expression is not a function"),
        ("(function () { throw new Error('at startup') })()", "Error: at startup"),
        ("(function () { while (true) {} })()", "exceeded the time or memory limit"),
        ("   \n", "is empty"),
    ],
)
def test_a_script_that_does_not_compile_is_a_startup_error(source: str, message: str) -> None:
    with pytest.raises(ValueError, match="--custom-access-token-script") as raised:
        CustomClaimsScript(source, timeout=0.3)
    assert message in str(raised.value)


async def test_an_endless_loop_times_out_and_adds_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = CustomClaimsScript("while (true) {}", timeout=0.2)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await script.claims(USER, PAYLOAD) == {}
    assert failures(caplog) == ["timeout"]
    # The next call runs normally.
    ok = CustomClaimsScript("return {fine: true}", timeout=0.2)
    assert await ok.claims(USER, PAYLOAD) == {"fine": True}


async def test_unbounded_allocation_is_stopped_by_the_memory_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A generous time limit, so that it is the memory limit that stops it.
    script = CustomClaimsScript(
        "const all = []; while (true) { all.push({n: all.length, s: 'x' + all.length}); }",
        timeout=30,
        max_memory=16 * 1024 * 1024,
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await script.claims(USER, PAYLOAD) == {}
    assert failures(caplog) == ["memory limit"]


async def test_memory_outside_the_heap_is_out_of_reach(caplog: pytest.LogCaptureFixture) -> None:
    names = [
        "ArrayBuffer", "SharedArrayBuffer", "DataView", "Atomics", "WebAssembly", "Uint8Array",
        "Float64Array", "BigInt64Array", "setTimeout", "clearTimeout", "__timer_manager",
        "require", "process", "fetch", "XMLHttpRequest",
    ]  # fmt: skip
    script = CustomClaimsScript(
        f"return Object.fromEntries({names!r}.map(n => [n, typeof globalThis[n]]))"
    )
    assert await script.claims(USER, PAYLOAD) == dict.fromkeys(names, "undefined")
    # so a gigabyte typed array (the heap limit would not count it) cannot be made
    big = CustomClaimsScript("return {n: new Uint8Array(2 ** 30).fill(1).length}")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await big.claims(USER, PAYLOAD) == {}
    assert failures(caplog) == ["script error"]


async def test_errors_are_swallowed_and_logged_without_user_data(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = CustomClaimsScript("throw new Error('no claims for ' + user.email)")
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert await script.claims(USER, PAYLOAD) == {}
    assert failures(caplog) == ["script error"]
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.exc_info is None
    assert "ada@example.com" not in repr(vars(record))
    assert "ada@example.com" not in caplog.text


@pytest.mark.parametrize(
    "returned",
    ["42", "'text'", "[1, 2]", "null", "undefined", "true", "function () {}", "user.email"],
)
async def test_anything_but_an_object_adds_nothing(
    returned: str, caplog: pytest.LogCaptureFixture
) -> None:
    script = CustomClaimsScript(f"return {returned};")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await script.claims(USER, PAYLOAD) == {}
    assert failures(caplog) == ["not an object"]
    assert "ada@example.com" not in caplog.text


async def test_a_result_json_cannot_express_is_a_script_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = CustomClaimsScript("const o = {n: 1n}; return o;")
    cyclic = CustomClaimsScript("const o = {}; o.self = o; return o;")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert await script.claims(USER, PAYLOAD) == {}
        assert await cyclic.claims(USER, PAYLOAD) == {}
    assert failures(caplog) == ["script error", "script error"]


async def test_no_call_sees_what_an_earlier_call_left_behind() -> None:
    script = CustomClaimsScript(
        """
        const earlier = {
          counter: typeof globalThis.counter === "undefined" ? null : globalThis.counter,
          proto: ({}).leaked === undefined ? null : ({}).leaked,
          last_match: RegExp.lastMatch,
          json: JSON.tag === undefined ? null : JSON.tag,
        };
        globalThis.counter = (globalThis.counter || 0) + 1;
        Object.prototype.leaked = user.email;
        JSON.tag = user.email;
        /[^@]+/.exec(user.email);
        return earlier;
        """
    )
    first = await script.claims(USER, PAYLOAD)
    second = await script.claims({**USER, "email": "bob@example.com"}, PAYLOAD)
    nothing = {"counter": None, "proto": None, "last_match": "", "json": None}
    assert first == nothing
    assert second == nothing


async def test_the_arguments_are_copies() -> None:
    script = CustomClaimsScript("user.email = 'changed'; tokenPayload.sub = 'x'; return {};")
    user, payload = dict(USER), dict(PAYLOAD)
    assert await script.claims(user, payload) == {}
    assert (user, payload) == (USER, PAYLOAD)


async def test_input_that_is_not_json_is_the_callers_bug() -> None:
    script = CustomClaimsScript("return {}")
    with pytest.raises(TypeError):
        await script.claims({"when": object()}, PAYLOAD)
    with pytest.raises(ValueError, match="Out of range float"):
        await script.claims({"n": float("nan")}, PAYLOAD)


async def test_concurrent_calls_from_trio_tasks_each_get_their_own_answer() -> None:
    script = CustomClaimsScript("return {echo: user.email, sub: tokenPayload.sub};", concurrency=3)
    slow = CustomClaimsScript("while (true) {}", timeout=0.3)
    results: dict[int, dict[str, Any]] = {}
    ticks = 0

    async def one(i: int) -> None:
        results[i] = await script.claims({"email": f"u{i}@example.com"}, {"sub": f"s{i}"})

    async def stuck() -> None:
        results[-1] = await slow.claims(USER, PAYLOAD)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        async with trio.open_nursery() as calls:
            calls.start_soon(stuck)
            for i in range(8):
                calls.start_soon(one, i)
        nursery.cancel_scope.cancel()
    assert results.pop(-1) == {}
    assert results == {i: {"echo": f"u{i}@example.com", "sub": f"s{i}"} for i in range(8)}
    # The loop kept running other tasks while scripts ran (and one looped) in threads.
    assert ticks > 10
