"""OpenTelemetry traces: ``--otel-traces-endpoint`` (OTLP over HTTP/protobuf) and
``--otel-traces-sample-ratio``.

Off (the default), nothing of OpenTelemetry is imported or started: every helper here
reads one module global and hands back a shared null context manager, so the request
path pays a function call. On, :func:`started` sets up the SDK for the process (a
``--workers`` worker sets up its own): a tracer provider sampling
``ParentBased(TraceIdRatioBased(ratio))`` (a caller's ``traceparent`` decides for its
trace; a new trace is kept at the ratio), and a batch processor whose thread sends spans
to the endpoint, off the event loop.

The spans: one SERVER span per HTTP request (GraphQL included) and gRPC call, started by
the transport with the caller's W3C ``traceparent``/``tracestate`` as its parent
(:func:`request_span`, which also puts the trace id in every log line of the request);
below it the service operation, the GraphQL document, argon2, the authorization engine's
checks (:func:`span`), one span per SQL statement and per Redis round trip
(:func:`instrument`); and one per outbox item, whose webhook carries the item span's
``traceparent`` (:func:`inject`). An outbox item runs after its request, in whichever
process claims it: its span starts a trace of its own.

SQL: one span per statement rather than per transaction. A statement span costs a few
microseconds against a statement's hundreds (bench/RESULTS.md, "Tracing") and names the
statement that was slow, which a transaction span cannot.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from bastion.core import log_context
from bastion.core.settings import Settings
from bastion.service.system import build_version
from bastion.storage import Storage
from bastion.storage.memory.redis import RedisMemoryStore
from bastion.storage.memory.redis_topology import CommandAhead, RedisClient, ScriptCall
from bastion.storage.memory.resp import Arg, Command

__all__ = [
    "enabled",
    "inject",
    "instrument",
    "mark_failed",
    "request_span",
    "span",
    "started",
]

_NULL: contextlib.nullcontext[None] = contextlib.nullcontext()
#: The SQL text kept on a statement's span, at most (a bulk insert's can be long).
_STATEMENT_CHARS = 2000
_SPAN_KEY = "bastion.tracing.span"


class _Tracing:
    """What is kept while tracing is on: the SDK's tracer and the W3C propagator."""

    def __init__(self, settings: Settings) -> None:
        version = build_version()
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        facts = {
            # OTEL_SERVICE_NAME, as every SDK reads it, names the service (else "bastion")
            "service.name": os.environ.get("OTEL_SERVICE_NAME") or "bastion",
            "service.version": version,
        }
        if settings.env:
            facts["deployment.environment.name"] = settings.env
        resource = Resource.create(facts)
        self.provider = TracerProvider(
            resource=resource,
            sampler=ParentBased(TraceIdRatioBased(settings.otel_traces_sample_ratio)),
        )
        self.provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otel_traces_endpoint))
        )
        self.tracer = self.provider.get_tracer("bastion", version)
        self.propagator = TraceContextTextMapPropagator()
        self.kinds = trace.SpanKind
        self.status = trace.Status
        self.error = trace.StatusCode.ERROR
        self.current_span = trace.get_current_span

    @contextlib.contextmanager
    def request_span(
        self, name: str, traceparent: str | None, tracestate: str | None, attributes: Any
    ) -> Iterator[Any]:
        carrier = {"traceparent": traceparent or "", "tracestate": tracestate or ""}
        parent = self.propagator.extract(carrier) if traceparent else None
        with self.tracer.start_as_current_span(
            name, context=parent, kind=self.kinds.SERVER, attributes=attributes
        ) as current:
            trace_id = current.get_span_context().trace_id
            logged_as = log_context.trace_id.set(format(trace_id, "032x"))
            try:
                yield current
            finally:
                log_context.trace_id.reset(logged_as)


_on: _Tracing | None = None


def enabled() -> bool:
    return _on is not None


@contextlib.contextmanager
def started(settings: Settings) -> Iterator[None]:
    """Tracing for this process while inside, when ``--otel-traces-endpoint`` is set; the
    spans still queued are sent on the way out."""
    global _on
    if not settings.otel_traces_endpoint:
        yield
        return
    _on = _Tracing(settings)
    try:
        yield
    finally:
        provider, _on = _on.provider, None
        provider.shutdown()


def request_span(
    name: str,
    traceparent: str | None,
    tracestate: str | None = None,
    attributes: Mapping[str, str] | None = None,
) -> contextlib.AbstractContextManager[Any]:
    """A SERVER span as the current span (None inside when tracing is off), the child of
    the caller's ``traceparent`` when it sent a valid one; its trace id is logged."""
    if _on is None:
        return _NULL
    return _on.request_span(name, traceparent, tracestate, attributes)


def span(
    name: str,
    attributes: Mapping[str, str | int] | None = None,
    *,
    client: bool = False,
    new_trace: bool = False,
) -> contextlib.AbstractContextManager[Any]:
    """A child of the current span as the current span, when that one is recorded (a
    request left out by the sampling ratio pays for no span below its own); with
    ``new_trace``, the first span of a trace outside any request (an outbox item)."""
    if _on is None or not (new_trace or _on.current_span().is_recording()):
        return _NULL
    kind = _on.kinds.CLIENT if client else _on.kinds.INTERNAL
    return _on.tracer.start_as_current_span(name, kind=kind, attributes=attributes)


def mark_failed(started_span: Any, description: str) -> None:
    """Set a span's status to error (a 5xx answer, a failed delivery)."""
    if _on is not None:
        started_span.set_status(_on.status(_on.error, description))


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current span's ``traceparent`` (and ``tracestate``) to outgoing headers."""
    if _on is not None:
        _on.propagator.inject(headers)


def instrument(storage: Storage) -> None:
    """Spans for every SQL statement on ``storage``'s database and every round trip to
    its Redis memory store. Call before anything else takes the Redis client."""
    if _on is None:
        return
    engine = storage.db.sync_engine
    if engine is not None:
        from sqlalchemy import event

        event.listen(engine, "before_cursor_execute", _statement_started)
        event.listen(engine, "after_cursor_execute", _statement_ended)
        event.listen(engine, "handle_error", _statement_failed)
    if isinstance(storage.memory, RedisMemoryStore):
        storage.memory.wrap_client(_TracedRedis)


def _statement_started(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
    if _on is None or not _on.current_span().is_recording():
        return
    verb = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else "SQL"
    conn.info[_SPAN_KEY] = _on.tracer.start_span(
        verb,
        kind=_on.kinds.CLIENT,
        attributes={
            "db.system.name": conn.dialect.name,
            "db.operation.name": verb,
            "db.query.text": statement[:_STATEMENT_CHARS],
        },
    )


def _statement_ended(conn: Any, *_: Any) -> None:
    started_span = conn.info.pop(_SPAN_KEY, None)
    if started_span is not None:
        started_span.end()


def _statement_failed(context: Any) -> None:
    started_span = context.connection.info.pop(_SPAN_KEY, None) if context.connection else None
    if started_span is not None and _on is not None:
        started_span.set_status(_on.status(_on.error, type(context.original_exception).__name__))
        started_span.end()


def _redis_span(command: Sequence[Arg]) -> contextlib.AbstractContextManager[Any]:
    name = command[0] if isinstance(command[0], str) else bytes(command[0]).decode()
    return span(f"redis {name.upper()}", {"db.system.name": "redis"}, client=True)


class _TracedRedis:
    """A :class:`RedisClient` whose round trips are spans (``redis GET``, ``redis
    EVALSHA``, ``redis pipeline``)."""

    def __init__(self, client: RedisClient) -> None:
        self._client = client

    async def execute(self, *args: Arg) -> Any:
        with _redis_span(args):
            return await self._client.execute(*args)

    async def pipeline(
        self, commands: Sequence[Command], script: ScriptCall | None = None
    ) -> list[Any]:
        with span("redis pipeline", {"db.system.name": "redis"}, client=True):
            return await self._client.pipeline(commands, script)

    async def script(self, body: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        with _redis_span(["EVALSHA"]):
            return await self._client.script(body, keys, args)

    def execute_ahead(self, *args: Arg) -> CommandAhead:
        return _TracedAhead(self._client.execute_ahead(*args), args)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        with _redis_span(["MGET"]):
            return await self._client.get_many(keys)

    async def delete(self, keys: Sequence[str]) -> int:
        with _redis_span(["DEL"]):
            return await self._client.delete(keys)

    async def delete_matching(self, pattern: str) -> int:
        with _redis_span(["SCAN"]):
            return await self._client.delete_matching(pattern)

    async def ping(self) -> None:
        await self._client.ping()

    def statistics(self) -> dict[str, int]:
        return self._client.statistics()

    async def aclose(self) -> None:
        await self._client.aclose()


class _TracedAhead:
    """A command sent ahead: its span covers the wait for its reply."""

    def __init__(self, ahead: CommandAhead, command: Sequence[Arg]) -> None:
        self._ahead = ahead
        self._command = command

    async def result(self) -> Any:
        with _redis_span(self._command):
            return await self._ahead.result()

    def drop(self) -> None:
        self._ahead.drop()
