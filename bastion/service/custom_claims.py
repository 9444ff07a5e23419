"""The operator's custom access-token script (``--custom-access-token-script``), run in V8.

Reference §5.2: the script is the source of a function called as
``customFunction(user, tokenPayload)``; the keys of the object it returns are merged into
the token's claims (the caller filters the reserved ones with
``core.auth.claims.merge_custom_claims``). Two spellings are accepted:

* a function, as Authorizer takes it: ``function (user, tokenPayload) { ... }``, an arrow
  function, or ``function customFunction(user, tokenPayload) { ... }``;
* a function body: statements that ``return`` the object, or that declare
  ``function customFunction(user, tokenPayload)`` (with helpers beside it), which is then
  called.

The source is compiled when the server starts: one that does not compile, or whose
expression is not a function, is a ``ValueError`` naming the flag.

Rules of a call:

* It runs off the trio loop (on one asyncio loop shared by every isolate of the process,
  waited for from a worker thread), at most ``concurrency`` at a time.
* Each call gets a brand-new V8 isolate that is freed afterwards, so no call can see what
  another left behind (globals, patched prototypes, ``RegExp.lastMatch``, closures). This
  costs a few milliseconds of CPU per call (about 4 ms here, against 0.25 ms in a shared
  context); making a shared context safe would need SES-style hardening of every
  intrinsic, and a token is issued only at login or refresh, which already hash a password.
* The script sees its two arguments (JSON copies) and the ECMAScript built-ins; V8 has no
  filesystem or network. Built-ins that allocate memory outside the V8 heap (ArrayBuffer,
  typed arrays, DataView, Atomics, WebAssembly) and mini-racer's timer helpers are removed
  first, because the memory limit only counts the heap.
* A call that runs past ``timeout`` seconds, passes ``max_memory`` bytes of heap, throws,
  or returns anything but a plain object yields ``{}``: the token is still issued. The
  failure is logged with its kind only: never the script's output or message, which may
  carry user data.
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import threading
from collections.abc import Coroutine, Mapping
from typing import Any

import trio
from py_mini_racer import JSEvalException, JSOOMException, mini_racer

__all__ = ["CustomClaimsScript"]

log = logging.getLogger("bastion.custom_claims")

_FLAG = "--custom-access-token-script"
#: Globals whose memory lives outside the V8 heap, and mini-racer's setTimeout helpers.
_REMOVED_GLOBALS = (
    "ArrayBuffer",
    "SharedArrayBuffer",
    "DataView",
    "Atomics",
    "WebAssembly",
    "Int8Array",
    "Uint8Array",
    "Uint8ClampedArray",
    "Int16Array",
    "Uint16Array",
    "Int32Array",
    "Uint32Array",
    "Float16Array",
    "Float32Array",
    "Float64Array",
    "BigInt64Array",
    "BigUint64Array",
    "setTimeout",
    "clearTimeout",
    "__timer_manager",
)
# ``var``-declared globals cannot be deleted: those are overwritten instead.
_PRELUDE = (
    f"for (const name of {json.dumps(_REMOVED_GLOBALS)}) {{"
    " delete globalThis[name]; if (name in globalThis) globalThis[name] = undefined; }\n"
)
# Run after a function body: a body that only declares customFunction gets it called.
_BODY_TAIL = (
    '\n;if (typeof customFunction === "function") return customFunction(user, tokenPayload);\n'
)


class _Form(enum.Enum):
    #: The source is a function expression.
    EXPRESSION = "expression"
    #: The source is the body of ``function (user, tokenPayload)``.
    BODY = "body"


class _Failure(enum.StrEnum):
    TIMEOUT = "timeout"
    MEMORY = "memory limit"
    SCRIPT_ERROR = "script error"
    NOT_AN_OBJECT = "not an object"


class CustomClaimsScript:
    """The compiled script; ``await script.claims(user, payload)`` gives the extra claims."""

    def __init__(
        self,
        source: str,
        *,
        timeout: float = 1.0,
        max_memory: int = 32 * 1024 * 1024,
        concurrency: int = 2,
    ) -> None:
        if not source.strip():
            raise ValueError(f"{_FLAG} is empty")
        self._timeout = timeout
        self._max_memory = max_memory
        self._limiter = trio.CapacityLimiter(concurrency)
        form = _detect_form(source, timeout=timeout, max_memory=max_memory)
        if form is _Form.EXPRESSION:
            self._entry = f"(\n{source}\n)"
        else:
            self._entry = f'new Function("user", "tokenPayload", {json.dumps(source + _BODY_TAIL)})'

    async def claims(self, user: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
        """The object the script returns for this user and these claims, or ``{}``.

        ``user`` and ``payload`` must be JSON-serialisable; a value that is not is the
        caller's bug and raises ``TypeError`` rather than being swallowed.
        """
        program = (
            f"{_PRELUDE}var __bastion_entry = {self._entry};\n"
            f"JSON.stringify(__bastion_entry({_js_literal(user)}, {_js_literal(payload)}));"
        )
        return await trio.to_thread.run_sync(self._claims_sync, program, limiter=self._limiter)

    def _claims_sync(self, program: str) -> dict[str, Any]:
        try:
            text = _run(_evaluate(program, self._timeout, self._max_memory), self._timeout)
        except TimeoutError:
            return _failed(_Failure.TIMEOUT)
        except JSOOMException:
            return _failed(_Failure.MEMORY)
        except JSEvalException:
            return _failed(_Failure.SCRIPT_ERROR)
        if not isinstance(text, str):  # JSON.stringify gave undefined: a function, undefined
            return _failed(_Failure.NOT_AN_OBJECT)
        value = json.loads(text)
        if not isinstance(value, dict):
            return _failed(_Failure.NOT_AN_OBJECT)
        return value


def _js_literal(value: Mapping[str, Any]) -> str:
    # JSON is a subset of ECMAScript (ES2019), so the text is a valid JS literal.
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _failed(kind: _Failure) -> dict[str, Any]:
    log.warning("custom access-token script ignored", extra={"failure": kind.value})
    return {}


#: How much longer than its own time limit a caller waits for an evaluation's answer.
_GRACE_SECONDS = 5.0


class _SharedLoop:
    """The one asyncio loop every isolate of this process runs on, in a daemon thread.

    mini-racer (0.14) crashes the process when isolates driven by two asyncio loops in two
    threads are created or run at the same time; on one loop they run side by side safely.
    Should the thread ever end, the next call starts a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.run_forever()
        except BaseException:
            log.exception("the custom access-token script loop stopped")
            raise

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                # A plain selector loop, not the policy's: trio-asyncio (the asyncpg driver)
                # installs a policy whose loops only run inside trio.
                self._loop = asyncio.SelectorEventLoop()
                self._thread = threading.Thread(
                    target=self._serve, args=(self._loop,), name="mini-racer", daemon=True
                )
                self._thread.start()
            return self._loop


_SHARED = _SharedLoop()


def _run(evaluation: Coroutine[Any, Any, object], seconds: float) -> object:
    """Run ``evaluation`` on the shared loop and wait for it from this (worker) thread, never
    much past its own limit: a loop that stopped answering is a timeout, not a hang."""
    future = asyncio.run_coroutine_threadsafe(evaluation, _SHARED.loop())
    try:
        return future.result(timeout=seconds + _GRACE_SECONDS)
    except TimeoutError:
        future.cancel()
        raise


async def _evaluate(code: str, seconds: float, max_memory: int) -> object:
    """Evaluate ``code`` in a fresh isolate with both limits; the isolate is then freed."""
    with mini_racer(event_loop=asyncio.get_running_loop()) as racer:
        racer.set_hard_memory_limit(max_memory)
        result = await asyncio.wait_for(racer.eval_cancelable(code), seconds)
        if racer.was_hard_memory_limit_reached():
            raise JSOOMException
        return result


def _detect_form(source: str, *, timeout: float, max_memory: int) -> _Form:
    """Compile ``source`` both ways; a function expression is evaluated (not called)."""
    check = f"""(function () {{
  const source = {json.dumps(source)};
  let make;
  try {{
    make = new Function("return (\\n" + source + "\\n);");
  }} catch (asFunction) {{
    if (!(asFunction instanceof SyntaxError)) throw asFunction;
    try {{
      new Function("user", "tokenPayload", source);
      return "body";
    }} catch (asBody) {{
      if (!(asBody instanceof SyntaxError)) throw asBody;
      return "as a function: " + asFunction + "; as a function body: " + asBody;
    }}
  }}
  return typeof make() === "function" ? "expression" : "the expression is not a function";
}})()"""
    outcome: list[str] = []

    def run() -> None:
        try:
            outcome.append(str(_run(_evaluate(_PRELUDE + check, timeout, max_memory), timeout)))
        except (TimeoutError, JSOOMException):
            outcome.append("evaluating it exceeded the time or memory limit")
        except JSEvalException as exc:
            lines = str(exc).strip().splitlines()  # the first line names the error
            outcome.append(lines[0] if lines else "evaluating it threw")

    # A thread of its own, so that this works whether or not an event loop runs here.
    thread = threading.Thread(target=run, name="custom-claims-compile")
    thread.start()
    thread.join()
    (result,) = outcome
    if result == "expression":
        return _Form.EXPRESSION
    if result == "body":
        return _Form.BODY
    raise ValueError(f"{_FLAG} does not compile: {result}")
