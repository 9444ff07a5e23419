"""Prometheus metrics, served only on the dedicated metrics listener.

Labels are bounded by construction: a route template (never the raw path), a method, a
status. A client address or a user never becomes a label: each distinct value would be
a new time series.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from typing import Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    make_asgi_app,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from bastion.service.system import build_version

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


class Metrics:
    """The server's metric families, on a registry of their own (one per server)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        Info("bastion_build", "The running build.", registry=self.registry).info(
            {"version": build_version()}
        )
        self.logins = Counter(
            "bastion_logins_total",
            "Password logins by identifier (email, phone) and outcome (signed_in, "
            "second_factor: a code was asked for, refused, throttled).",
            ["identifier", "outcome"],
            registry=self.registry,
        )
        self.tokens_issued = Counter(
            "bastion_tokens_issued_total",
            "Tokens minted, by kind (access, id, refresh).",
            ["kind"],
            registry=self.registry,
        )
        self.http_requests = Counter(
            "bastion_http_requests_total",
            "HTTP requests by route template, method and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_latency = Histogram(
            "bastion_http_request_duration_seconds",
            "HTTP request latency by route template and method.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.grpc_requests = Counter(
            "bastion_grpc_requests_total",
            "gRPC calls by full method name and status code.",
            ["method", "code"],
            registry=self.registry,
        )
        self.grpc_latency = Histogram(
            "bastion_grpc_request_duration_seconds",
            "gRPC call latency by full method name.",
            ["method"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.storage_latency = Histogram(
            "bastion_storage_call_duration_seconds",
            "Latency of storage calls by store and outcome.",
            ["store", "outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.pruned_rows = Counter(
            "bastion_pruned_rows_total",
            "Rows deleted by the background prune (expired, or past retention), by table.",
            ["table"],
            registry=self.registry,
        )
        self.store_failures = Counter(
            "bastion_store_failures_total",
            "Calls to a store that failed (it is logged once when it goes down and once "
            "when it answers again), by store and operation.",
            ["store", "operation"],
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "bastion_rate_limited_total",
            "Requests refused by the per-IP rate limit, by surface.",
            ["surface"],
            registry=self.registry,
        )
        self.fga_checks = Counter(
            "bastion_fga_checks_total",
            "Authorization checks by operation and result (allowed, denied, error).",
            ["operation", "result"],
            registry=self.registry,
        )
        self.fga_check_latency = Histogram(
            "bastion_fga_check_duration_seconds",
            "Latency of one authorization check by operation.",
            ["operation"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.mfa_challenges = Counter(
            "bastion_mfa_challenges_total",
            "MFA challenges by method and outcome (issued, passed, failed).",
            ["method", "outcome"],
            registry=self.registry,
        )
        self.fga_operations = Counter(
            "bastion_fga_operations_total",
            "Authorization engine operations by name and result (success, error).",
            ["operation", "result"],
            registry=self.registry,
        )

    def watch_outbox(self, worker: OutboxView) -> None:
        """Report the outbox's work (read at each scrape): items settled by kind and
        outcome (webhook delivery failures among them), the backlog and its oldest age."""
        self.registry.register(_OutboxCollector(worker))

    def watch_storage(self, statistics: Callable[[], Mapping[str, Mapping[str, int]]]) -> None:
        """Report the stores' own counters (read at each scrape): connections opened,
        calls that found a store unreachable, and Sentinel failovers seen."""
        self.registry.register(_StoreCollector(statistics))

    def watch_replica(self, statistics: Callable[[], Mapping[str, int]]) -> None:
        """Report the read replica's counters (``--database-replica-url``): where the
        authorization engine's reads went, and whether the replica is up."""
        self.registry.register(_ReplicaCollector(statistics))

    def watch_generations(self, reads: Mapping[str, int]) -> None:
        """Report the authorization engine's reads of its stores' generations in Redis
        (:mod:`storage.fga_generation`), by outcome."""
        self.registry.register(_GenerationCollector(reads))

    def watch_engine_cache(self, statistics: Callable[[], ReadCacheView]) -> None:
        """Report the authorization engine's read cache (``--fga-cache-mib``): its bytes,
        bound and entries, and the reads it answered or missed."""
        self.registry.register(_EngineCacheCollector(statistics))

    def asgi_app(self) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
        """``/metrics`` as an ASGI app that also answers hypercorn's lifespan protocol.

        prometheus-client's app ignores lifespan events, which hypercorn's trio worker
        treats as a failed startup; and it would answer on every path, which we don't want.
        """
        inner = make_asgi_app(self.registry)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "lifespan":
                while True:
                    message = await receive()
                    if message["type"] == "lifespan.startup":
                        await send({"type": "lifespan.startup.complete"})
                    elif message["type"] == "lifespan.shutdown":
                        await send({"type": "lifespan.shutdown.complete"})
                        return
            if scope["type"] == "http" and scope["path"] == "/metrics":
                await inner(scope, receive, send)
                return
            body = b'{"code":"not_found","message":"not found"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})

        return app


class ReadCacheView(Protocol):
    entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    evictions: int


class _EngineCacheCollector(Collector):
    def __init__(self, statistics: Callable[[], ReadCacheView]) -> None:
        self._statistics = statistics

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self._statistics()
        for name, help_text, value in (
            ("bytes", "Estimated bytes of the engine's cached tuple reads.", stats.bytes),
            ("max_bytes", "Their bound (--fga-cache-mib).", stats.max_bytes),
            ("entries", "Cached tuple reads (answers) of the engine.", stats.entries),
        ):
            yield GaugeMetricFamily(f"bastion_fga_read_cache_{name}", help_text, value=value)
        for name, help_text, value in (
            ("hits", "Engine tuple reads answered by the cache.", stats.hits),
            ("misses", "Engine tuple reads the cache could not answer.", stats.misses),
            ("evictions", "Cached reads evicted to stay within the bound.", stats.evictions),
        ):
            yield CounterMetricFamily(f"bastion_fga_read_cache_{name}", help_text, value=value)


class OutboxView(Protocol):
    settled: Mapping[tuple[str, str], int]
    backlog: tuple[int, float]


class _OutboxCollector(Collector):
    def __init__(self, worker: OutboxView) -> None:
        self._worker = worker

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        settled = CounterMetricFamily(
            "bastion_outbox_items",
            "Outbox items settled by kind (mail, sms, webhook_delivery ...) and outcome "
            "(delivered, retried, failed: failed for good).",
            labels=["kind", "outcome"],
        )
        for (kind, outcome), value in sorted(self._worker.settled.items()):
            settled.add_metric([kind, outcome], value)
        count, age = self._worker.backlog
        yield settled
        yield GaugeMetricFamily(
            "bastion_outbox_backlog", "Outbox items waiting to run (retries included).", count
        )
        yield GaugeMetricFamily(
            "bastion_outbox_oldest_age_seconds", "Age of the oldest waiting outbox item.", age
        )


class _StoreCollector(Collector):
    def __init__(self, statistics: Callable[[], Mapping[str, Mapping[str, int]]]) -> None:
        self._statistics = statistics

    def collect(self) -> Iterator[CounterMetricFamily]:
        stats = self._statistics()
        families = {
            "connections_opened": CounterMetricFamily(
                "bastion_store_connections_opened",
                "Connections a store's pool opened (reconnects after a failover show here).",
                labels=["store"],
            ),
            "unavailable": CounterMetricFamily(
                "bastion_store_unavailable",
                "Store calls that found the store unreachable (answered 503).",
                labels=["store"],
            ),
            "replayed": CounterMetricFamily(
                "bastion_store_replayed",
                "Transactions run again on a new connection after theirs was lost before commit.",
                labels=["store"],
            ),
            "failovers": CounterMetricFamily(
                "bastion_store_failovers",
                "Master changes seen through Redis Sentinel.",
                labels=["store"],
            ),
        }
        for store, counters in stats.items():
            for name, value in counters.items():
                if name in families:
                    families[name].add_metric([store], value)
        yield from families.values()


class _ReplicaCollector(Collector):
    def __init__(self, statistics: Callable[[], Mapping[str, int]]) -> None:
        self._statistics = statistics

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self._statistics()
        reads = CounterMetricFamily(
            "bastion_fga_replica_reads",
            "The authorization engine's store reads with a read replica, by outcome: "
            "replica (answered there), behind (the replica had not reached this process's "
            "writes or a HIGHER_CONSISTENCY request: the primary answered), unavailable "
            "(the replica failed or rests after a failure: the primary answered).",
            labels=["outcome"],
        )
        for outcome in ("replica", "behind", "unavailable"):
            reads.add_metric([outcome], stats.get(outcome, 0))
        yield reads
        yield GaugeMetricFamily(
            "bastion_fga_replica_up",
            "1 while the read replica answers; 0 from a failure until it answers again.",
            value=stats.get("up", 0),
        )


class _GenerationCollector(Collector):
    def __init__(self, reads: Mapping[str, int]) -> None:
        self._reads = reads

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "bastion_fga_generation_reads",
            "The authorization engine's reads of a store's generation in Redis, by outcome: "
            "current (the SQL revision read is skipped if this process refreshed under it), "
            "writing (a write in progress: SQL is read), unavailable (Redis failed: SQL is "
            "read).",
            labels=["outcome"],
        )
        for outcome, value in self._reads.items():
            family.add_metric([outcome], value)
        yield family
