"""Everything a running server shares between its surfaces."""

from __future__ import annotations

import time
from dataclasses import dataclass

import trio
from sqlalchemy import Connection, select

from bastion.core.fga.server_context import parse_server_context
from bastion.core.networks import Network, parse_networks
from bastion.core.origins import OriginPolicy
from bastion.core.settings import Settings
from bastion.service.access import Service
from bastion.service.admin import Admin
from bastion.service.admin import outbox_handlers as admin_outbox_handlers
from bastion.service.auth.issuer import CustomClaims
from bastion.service.auth.service import AuthService
from bastion.service.fga.base import ListBounds
from bastion.service.fga.engine import EngineCaches
from bastion.service.fga.openfga import OpenFgaService
from bastion.service.fga.service import FgaService
from bastion.service.mail import Mail, SmtpMailer
from bastion.service.metrics import Metrics
from bastion.service.oauth.backchannel import backchannel_handlers
from bastion.service.oauth.service import OAuthService
from bastion.service.outbox import Handler, OutboxWorker
from bastion.service.passkeys import PasskeyService
from bastion.service.ratelimit import RateLimiter
from bastion.service.retention import Pruner
from bastion.service.sms import sms_handlers
from bastion.service.social.service import SocialLogin
from bastion.storage import Storage, StorageUnavailable
from bastion.storage.fga_stores import DEFAULT_FGA_STORE, FgaStores
from bastion.storage.outbox import OutboxItem
from bastion.storage.sql.schema import users


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
    #: The authorization engine's operations (check/list permissions, ``_fga_*``).
    fga: FgaService
    #: OpenFGA's own API over every store (``--openfga-api-key``; issue 25).
    openfga: OpenFgaService
    #: Webhooks, email templates, audit log (the super-admin surface beyond the session).
    admin: Admin
    #: The authentication flows (signup, login, sessions, tokens ...; issue 3).
    auth: AuthService
    #: Social login through the configured providers (issue 10).
    social: SocialLogin
    #: The OAuth 2.0 / OpenID Connect provider (issue 10).
    oauth: OAuthService
    #: passkeys (issue 22)
    passkeys: PasskeyService
    #: the background prune of expired rows and old logs (``--prune-interval``)
    pruner: Pruner

    async def check_ready(self) -> None:
        """Storage answers AND the migrated schema is there (raises StorageUnavailable);
        a read replica is probed, and reported down, without failing readiness."""
        await self.storage.ping()
        try:
            with trio.fail_after(self.storage.timeout):
                await self.storage.db.run(_probe_schema)
        except trio.TooSlowError:
            raise StorageUnavailable("schema probe did not answer in time") from None
        replica = None if self.openfga.stores is None else self.openfga.stores.replica
        if replica is not None:
            # Never "not ready": the primary serves the engine's reads meanwhile. The
            # probe's failure is logged and shows in bastion_fga_replica_up.
            await replica.probe()

    @classmethod
    def build(
        cls,
        settings: Settings,
        storage: Storage,
        metrics: Metrics,
        *,
        fga_stores: FgaStores | None = None,
    ) -> Runtime:
        service = Service(settings, storage)
        origins = OriginPolicy(settings.allowed_origins, settings.url)
        auth = AuthService(settings, storage, origins, custom_claims=_custom_claims(settings))
        service.auth = auth
        auth.metrics = metrics
        fga = FgaService(
            service,
            None if fga_stores is None else fga_stores.store(DEFAULT_FGA_STORE),
            metrics,
            allow_user_contextual=settings.allow_user_contextual_tuples,
            list_bounds=ListBounds(
                objects_max=settings.fga_list_objects_max_results,
                objects_seconds=settings.fga_list_objects_deadline,
                users_max=settings.fga_list_users_max_results,
                users_seconds=settings.fga_list_users_deadline,
            ),
            caches=EngineCaches.sized(settings.fga_cache_mib),
            allow_user_context=settings.allow_user_context,
            server_context=parse_server_context(settings.fga_server_context),
            max_condition_cost=settings.fga_max_condition_cost,
        )
        auth.relation_gate = fga
        oauth = OAuthService(auth)
        auth.state_binder = oauth.bind_state
        return cls(
            settings=settings,
            storage=storage,
            metrics=metrics,
            service=service,
            origins=origins,
            trusted_proxies=parse_networks(settings.trusted_proxies),
            rate_limiter=RateLimiter(
                storage.memory,
                rps=settings.rate_limit_rps,
                burst=settings.rate_limit_burst,
                fail_closed=settings.rate_limit_fail_closed,
                metrics=metrics,
            ),
            outbox=OutboxWorker(
                storage.db,
                {**_outbox_handlers(settings, storage), **auth.mailed_links.handlers()},
            ),
            fga=fga,
            openfga=OpenFgaService(fga, fga_stores, settings.openfga_api_key),
            admin=Admin.build(service, settings, storage, auth),
            auth=auth,
            social=SocialLogin(auth),
            oauth=oauth,
            passkeys=PasskeyService(auth, service),
            pruner=Pruner(settings, storage, metrics, time.time),
        )


def _custom_claims(settings: Settings) -> CustomClaims | None:
    """``--custom-access-token-script``, compiled at startup (a bad script stops it)."""
    if not settings.custom_access_token_script:
        return None
    from bastion.service.custom_claims import CustomClaimsScript

    return CustomClaimsScript(settings.custom_access_token_script).claims


def _probe_schema(connection: Connection) -> None:
    try:
        connection.execute(select(users.c.id).limit(1)).all()
    except Exception as exc:
        raise StorageUnavailable("schema not readable") from exc


def _outbox_handlers(settings: Settings, storage: Storage) -> dict[str, Handler]:
    """What the outbox worker can carry out with this configuration."""
    handlers: dict[str, Handler] = {**admin_outbox_handlers(settings, storage)}
    if settings.smtp_host:
        mailer = SmtpMailer(settings)

        async def send_mail(item: OutboxItem) -> None:
            await mailer.send(Mail(**item.payload))

        handlers["mail"] = send_mail
    handlers.update(backchannel_handlers(settings))
    handlers.update(sms_handlers(settings))  # "sms" when every SMS provider flag is set
    return handlers
