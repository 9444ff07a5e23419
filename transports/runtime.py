"""Everything a running server shares between its surfaces."""

from __future__ import annotations

from dataclasses import dataclass

import trio
from sqlalchemy import Connection, select

from core.settings import Settings
from storage import Storage, StorageUnavailable
from storage.outbox import OutboxItem
from storage.sql.schema import users
from transports.http.edge import Network, OriginPolicy, parse_networks
from transports.mail import Mail, SmtpMailer
from transports.metrics import Metrics
from transports.outbox import Handler, OutboxWorker
from transports.ratelimit import RateLimiter
from transports.service import Service


@dataclass(slots=True)
class Runtime:
    settings: Settings
    storage: Storage
    metrics: Metrics
    service: Service
    origins: OriginPolicy
    trusted_proxies: tuple[Network, ...]
    rate_limiter: RateLimiter
    outbox: OutboxWorker

    async def check_ready(self) -> None:
        """Storage answers AND the migrated schema is there (raises StorageUnavailable)."""
        await self.storage.ping()
        try:
            with trio.fail_after(self.storage.timeout):
                await self.storage.db.run(_probe_schema)
        except trio.TooSlowError:
            raise StorageUnavailable("schema probe did not answer in time") from None

    @classmethod
    def build(cls, settings: Settings, storage: Storage, metrics: Metrics) -> Runtime:
        return cls(
            settings=settings,
            storage=storage,
            metrics=metrics,
            service=Service(settings, storage),
            origins=OriginPolicy(settings.allowed_origins, settings.url),
            trusted_proxies=parse_networks(settings.trusted_proxies),
            rate_limiter=RateLimiter(
                storage.memory,
                rps=settings.rate_limit_rps,
                burst=settings.rate_limit_burst,
                fail_closed=settings.rate_limit_fail_closed,
                metrics=metrics,
            ),
            outbox=OutboxWorker(storage.db, _outbox_handlers(settings)),
        )


def _probe_schema(connection: Connection) -> None:
    try:
        connection.execute(select(users.c.id).limit(1)).all()
    except Exception as exc:
        raise StorageUnavailable("schema not readable") from exc


def _outbox_handlers(settings: Settings) -> dict[str, Handler]:
    """What the outbox worker can carry out with this configuration."""
    handlers: dict[str, Handler] = {}
    if settings.smtp_host:
        mailer = SmtpMailer(settings)

        async def send_mail(item: OutboxItem) -> None:
            await mailer.send(Mail(**item.payload))

        handlers["mail"] = send_mail
    return handlers
