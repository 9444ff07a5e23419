"""The start-up rules that span flags (credentials, database, keys, ports, origins, MFA,
the authorization store): each a function over :class:`Settings` raising
:class:`ConfigError` with the fix; :func:`validate` runs them all. Pure: no I/O."""

from __future__ import annotations

import ipaddress
import re
from typing import Final
from urllib.parse import urlsplit

from bastion.core.fga.server_context import parse_server_context
from bastion.core.redis_url import parse_redis_url
from bastion.core.settings.declaration import Settings, default_url
from bastion.core.settings.table import FLAGS
from bastion.core.settings.vocabulary import (
    DATABASE_TYPES,
    DIALECT_SCHEMES,
    JWT_TYPES,
    NOSQL_DATABASE_TYPES,
    ConfigError,
)
from bastion.core.social.apple import parse_apple_secret
from bastion.core.social.providers import parse_provider_urls


def validate(settings: Settings) -> None:
    """Check the startup rules that need no I/O; raise the first broken one. When more
    than one required flag is missing they are named together, so a first start does not
    take one restart per flag."""
    missing = _missing_required(settings)
    if len(missing) > 1:
        raise ConfigError(f"missing required flags: {', '.join(missing)} (see bastion --help)")
    for rule in _RULES:
        rule(settings)


def validate_database(settings: Settings) -> None:
    """The rules of the database flags alone: for the commands that only open the database
    (``bastion migrate``), which take no secret but the database's; with the engine's store
    flags when the command reads them (``bastion fga import``)."""
    _require_database(settings)
    _check_memory_store(settings)
    _check_fga_store(settings)


def _missing_required(s: Settings) -> list[str]:
    missing = [
        option
        for option, value in (
            ("--admin-secret", s.admin_secret),
            ("--client-id", s.client_id),
            ("--client-secret", s.client_secret),
        )
        if not value
    ]
    has_parts = any((s.database_host, s.database_name, s.database_url))
    if not s.database_type and not has_parts:
        missing.append("a database (--database-type with --database-url)")
    if not s.jwt_type:
        missing.append("--jwt-type (with --jwt-secret, or --jwt-private-key and --jwt-public-key)")
    return missing


def _require_credentials(s: Settings) -> None:
    if not s.admin_secret:
        raise ConfigError("--admin-secret is required and must not be empty.")
    if not s.client_id:
        raise ConfigError("--client-id is required and must not be empty.")
    if not s.client_secret:
        raise ConfigError("--client-secret is required and must not be empty.")
    for flag, previous, current in (
        ("admin-secret", s.admin_secret_previous, s.admin_secret),
        ("client-secret", s.client_secret_previous, s.client_secret),
    ):
        if previous == current:
            raise ConfigError(
                f"--{flag}-previous is the same as --{flag}: give the secret being replaced"
            )


_SUPPORTED_DATABASES = ", ".join(DATABASE_TYPES)


def _require_database(s: Settings) -> None:
    parts = [
        s.database_host,
        s.database_name,
        s.database_username,
        s.database_password,
        s.database_port,
    ]
    has_parts = any(parts)
    if not s.database_type:
        if not s.database_url and not has_parts:
            raise ConfigError(
                "a database is required: give --database-type with --database-url "
                "(or with --database-host and --database-name)"
            )
        raise ConfigError(f"--database-type is required (one of {_SUPPORTED_DATABASES})")
    if s.database_type not in DATABASE_TYPES:
        kind = "NoSQL databases are" if s.database_type in NOSQL_DATABASE_TYPES else "it is"
        raise ConfigError(
            f"unsupported --database-type {s.database_type!r} ({kind} not supported); "
            f"supported: {_SUPPORTED_DATABASES}"
        )
    if s.database_url and has_parts:
        raise ConfigError(
            "give either --database-url or --database-host/--database-name/--database-port/"
            "--database-username/--database-password, not both"
        )
    if s.database_type == "sqlite":
        if not s.database_url and not s.database_name:
            raise ConfigError(
                "a database is required: give --database-url (a file path or sqlite:/// URL) "
                "or --database-name (a file path) for --database-type sqlite"
            )
    elif not s.database_url and not (s.database_host and s.database_name):
        raise ConfigError(
            f"a database is required: give --database-url, or --database-host and "
            f"--database-name, for --database-type {s.database_type}"
        )
    if not 0 <= s.database_port <= 65535:
        raise ConfigError(f"--database-port must be between 0 and 65535, got {s.database_port}")
    if s.database_url:
        _check_database_url(s)


def _check_database_url(s: Settings) -> None:
    # The URL may hold a password: messages name its scheme only.
    dialect = DATABASE_TYPES[s.database_type]
    if "://" not in s.database_url:
        if dialect != "sqlite":
            raise ConfigError(
                f"--database-url must be a URL (scheme://...) for --database-type {s.database_type}"
            )
        return
    scheme = s.database_url.split("://", 1)[0].lower()
    if DIALECT_SCHEMES.get(scheme.split("+", 1)[0]) != dialect:
        raise ConfigError(
            f"--database-url has scheme {scheme!r}, which does not match "
            f"--database-type {s.database_type}"
        )


def _check_memory_store(s: Settings) -> None:
    if not s.memory_store_url or s.memory_store_kind == "memory":
        return
    try:
        parse_redis_url(s.memory_store_url)
    except ValueError as exc:
        raise ConfigError(
            "--memory-store-url must be memory://, redis://, rediss://, "
            "redis+sentinel://host:port[,host:port...]/service[/db] or "
            "redis+cluster://host:port[,host:port...] (or their rediss+ forms; leave it "
            f"out to keep sessions in the main database): {exc}"
        ) from None


#: More is never faster on one machine: the processes only contend for its cores.
MAX_WORKERS = 64


def _check_recent_sign_in(s: Settings) -> None:
    if s.recent_sign_in_seconds < 1:
        raise ConfigError("--recent-sign-in-seconds must be at least 1")


def _check_request_timeout(s: Settings) -> None:
    if not s.request_timeout > 0:
        raise ConfigError("--request-timeout must be a positive number of seconds")


def _check_shutdown_timeout(s: Settings) -> None:
    if not s.shutdown_timeout >= 0:
        raise ConfigError("--shutdown-timeout must be a number of seconds, 0 or more")


def _check_retention(s: Settings) -> None:
    for flag, days in (("audit-log", s.audit_log_retention_days),
                       ("webhook-log", s.webhook_log_retention_days)):  # fmt: skip
        if days < 0:
            raise ConfigError(f"--{flag}-retention-days must be 0 (keep forever) or more")
    if not s.prune_interval >= 0:
        raise ConfigError("--prune-interval must be a number of seconds, 0 (never) or more")
    if s.prune_batch_size < 1:
        raise ConfigError("--prune-batch-size must be at least 1")


def _check_workers(s: Settings) -> None:
    if not 1 <= s.workers <= MAX_WORKERS:
        raise ConfigError(f"--workers must be between 1 and {MAX_WORKERS}, got {s.workers}")
    if s.workers == 1:
        return
    if s.memory_store_kind == "memory":
        raise ConfigError(
            "--workers above 1 needs a memory store the processes share: memory:// lives "
            "in one process (use redis://, or leave --memory-store-url out to use the "
            "main database)"
        )
    if s.http_server != "h11":
        raise ConfigError("--workers above 1 needs --http-server h11")


def _require_jwt(s: Settings) -> None:
    supported = ", ".join(JWT_TYPES)
    if not s.jwt_type:
        raise ConfigError(f"--jwt-type is required (one of {supported})")
    if s.jwt_type not in JWT_TYPES:
        raise ConfigError(f"unsupported --jwt-type {s.jwt_type!r}; supported: {supported}")
    if s.is_hmac:
        if not s.jwt_secret:
            raise ConfigError(f"--jwt-type {s.jwt_type} needs --jwt-secret")
        if s.jwt_private_key or s.jwt_public_key:
            raise ConfigError(
                f"--jwt-private-key and --jwt-public-key are not used with --jwt-type "
                f"{s.jwt_type}; give only --jwt-secret"
            )
        return
    if not (s.jwt_private_key and s.jwt_public_key):
        raise ConfigError(
            f"--jwt-type {s.jwt_type} needs --jwt-private-key and --jwt-public-key (PEM)"
        )
    if s.jwt_secret:
        raise ConfigError(f"--jwt-secret is not used with --jwt-type {s.jwt_type}")


def _require_secondary_jwt(s: Settings) -> None:
    """The verification-only second key (rotation): all of it or none of it."""
    material = (s.jwt_secondary_secret, s.jwt_secondary_private_key, s.jwt_secondary_public_key)
    if not s.jwt_secondary_type:
        if any(material):
            raise ConfigError("--jwt-secondary-* key material needs --jwt-secondary-type")
        return
    if s.jwt_secondary_type not in JWT_TYPES:
        raise ConfigError(f"unsupported --jwt-secondary-type {s.jwt_secondary_type!r}")
    if s.jwt_secondary_type.startswith("HS"):
        if not s.jwt_secondary_secret or s.jwt_secondary_private_key or s.jwt_secondary_public_key:
            raise ConfigError(
                f"--jwt-secondary-type {s.jwt_secondary_type} needs --jwt-secondary-secret only"
            )
        return
    if s.jwt_secondary_secret or not (s.jwt_secondary_public_key or s.jwt_secondary_private_key):
        raise ConfigError(
            f"--jwt-secondary-type {s.jwt_secondary_type} needs --jwt-secondary-public-key "
            "(or --jwt-secondary-private-key), PEM"
        )


def _check_ports(s: Settings) -> None:
    ports = [("--http-port", s.http_port), ("--metrics-port", s.metrics_port)]
    if s.enable_grpc:
        ports.append(("--grpc-port", s.grpc_port))
    for option, port in ports:
        if not 0 <= port <= 65535:
            raise ConfigError(f"{option} must be between 0 and 65535, got {port}")
    # 0 asks the OS for a free port, so two zeros never collide.
    for i, (first, port) in enumerate(ports):
        for second, other in ports[i + 1 :]:
            if port and port == other:
                raise ConfigError(f"{first} and {second} must differ (both are {port})")


def _check_hosts(s: Settings) -> None:
    if not s.host:
        raise ConfigError("--host must not be empty")
    if not s.metrics_host:
        raise ConfigError("--metrics-host must not be empty")


def _check_trusted_proxies(s: Settings) -> None:
    for entry in s.trusted_proxies:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ConfigError(
                f"--trusted-proxies: {entry!r} is not a CIDR range or IP address"
            ) from None


def _check_url(s: Settings) -> None:
    parts = urlsplit(s.url)
    if "@" in parts.netloc:  # checked first: the message must not echo a password
        raise ConfigError("--url must not contain a user name or password")
    if s.http_port == 0 and s.url == default_url(s.host, 0):
        raise ConfigError("--http-port=0 needs --url: the public URL cannot name an unknown port")
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or not port_ok
        or any(char.isspace() for char in s.url)
    ):
        raise ConfigError(f"--url must be an absolute http:// or https:// URL, got {s.url!r}")
    if parts.query or parts.fragment or "?" in s.url or "#" in s.url:
        raise ConfigError(f"--url must not have a query or fragment, got {s.url!r}")


def _check_tracing(s: Settings) -> None:
    ratio, endpoint = s.otel_traces_sample_ratio, s.otel_traces_endpoint
    if not 0.0 <= ratio <= 1.0:
        raise ConfigError(f"--otel-traces-sample-ratio must be between 0 and 1, got {ratio}")
    if endpoint and not re.match(r"https?://[^/?#\s]", endpoint):
        raise ConfigError(
            f"--otel-traces-endpoint must be an http:// or https:// URL, got {endpoint!r}"
        )


def _check_choices(s: Settings) -> None:
    # database-type and jwt-type have rules of their own above.
    for flag in FLAGS:
        if not flag.choices or flag.name in ("database-type", "jwt-type"):
            continue
        value = getattr(s, flag.attribute)
        if value != flag.default and value not in flag.choices:
            raise ConfigError(
                f"{flag.option} must be one of {', '.join(flag.choices)}, got {value!r}"
            )


def _check_security(s: Settings) -> None:
    if not s.allowed_origins:
        raise ConfigError("--allowed-origins must list at least one origin (or *)")
    if any(entry.strip().lower() == "null" for entry in s.allowed_origins):
        raise ConfigError(
            "--allowed-origins cannot list null: sandboxed frames, files and redirects all "
            "send Origin: null, so it would trust any of them"
        )
    if s.rate_limit_enabled and s.rate_limit_burst < 1:
        raise ConfigError(
            f"--rate-limit-burst must be at least 1 when rate limiting is on, "
            f"got {s.rate_limit_burst}"
        )
    if bool(s.tls_cert_file) != bool(s.tls_key_file):
        raise ConfigError("--tls-cert-file and --tls-key-file must be given together")
    if bool(s.grpc_tls_cert) != bool(s.grpc_tls_key):
        raise ConfigError("--grpc-tls-cert and --grpc-tls-key must be given together")
    if s.cookie_domain and not _COOKIE_DOMAIN.fullmatch(s.cookie_domain):
        raise ConfigError(
            f"--cookie-domain must be a bare domain such as example.com, got {s.cookie_domain!r}"
        )


def _check_mail(s: Settings) -> None:
    # Both features only work by sending mail: without SMTP they would silently do nothing.
    for flag, on in (
        ("--enable-email-verification", s.enable_email_verification),
        ("--enable-magic-link-login", s.enable_magic_link_login),
    ):
        if on and not s.smtp_host:
            raise ConfigError(f"{flag} needs mail: give --smtp-host (and --smtp-sender-email)")


def _check_mfa(s: Settings) -> None:
    # Each way of sending a code needs its service; MFA on needs a method to offer.
    provider = {
        "--sms-account-sid": s.sms_account_sid,
        "--sms-api-key": s.sms_api_key,
        "--sms-api-secret": s.sms_api_secret,
        "--sms-sender": s.sms_sender,
    }
    missing = [option for option, value in provider.items() if not value]
    for flag, on in (
        ("--enable-sms-otp", s.enable_sms_otp),
        ("--enable-phone-verification", s.enable_phone_verification),
    ):
        if on and missing:
            raise ConfigError(
                f"{flag} needs the SMS provider: give {', '.join(provider)} "
                f"(missing: {', '.join(missing)})"
            )
    if s.enable_email_otp and not s.smtp_host:
        raise ConfigError(
            "--enable-email-otp needs mail: give --smtp-host (and --smtp-sender-email)"
        )
    if s.enable_mfa and not (s.enable_email_otp or s.enable_sms_otp or s.enable_totp_login):
        raise ConfigError(
            "--enable-mfa needs a method: give --enable-totp-login, --enable-email-otp "
            "or --enable-sms-otp"
        )
    host = (urlsplit(s.url).hostname or "").lower()
    rp_id = s.webauthn_rp_id.lower()
    if s.enable_passkeys and rp_id and host != rp_id and not host.endswith("." + rp_id):
        raise ConfigError(
            f"--webauthn-rp-id {s.webauthn_rp_id} must be the host of --url ({host}) "
            "or a domain it belongs to"
        )


_FGA_SQL_STORES: Final[frozenset[str]] = frozenset({"sqlite", "postgres", "mysql"})


def _check_fga_store(s: Settings) -> None:
    if s.fga_store_url and s.fga_store not in _FGA_SQL_STORES:
        raise ConfigError("--fga-store-url needs --fga-store sqlite, postgres or mysql")
    if (
        s.fga_store in _FGA_SQL_STORES
        and not s.fga_store_url
        and s.database_type in DATABASE_TYPES
        and DATABASE_TYPES[s.fga_store] != DATABASE_TYPES[s.database_type]
    ):
        raise ConfigError(
            f"--fga-store {s.fga_store} needs --fga-store-url "
            f"(the main database is {s.database_type})"
        )


def _check_database_replica(s: Settings) -> None:
    if not s.database_replica_url:
        return
    if s.database_type in DATABASE_TYPES and DATABASE_TYPES[s.database_type] == "sqlite":
        raise ConfigError("--database-replica-url needs a PostgreSQL or MySQL/MariaDB database")
    if s.fga_store_url or s.fga_store in ("memory", "none"):
        raise ConfigError(
            "--database-replica-url serves the authorization engine's reads of the main "
            "database: it needs the engine's store there (no --fga-store-url, memory or none)"
        )


def _check_openfga_api(s: Settings) -> None:
    if s.openfga_api_key and s.fga_store == "none":
        raise ConfigError(
            "--openfga-api-key serves the authorization engine's stores: "
            "it needs the engine on (not --fga-store none)"
        )


def _check_list_bounds(s: Settings) -> None:
    for option, value in (
        ("--fga-list-objects-max-results", s.fga_list_objects_max_results),
        ("--fga-list-objects-deadline", s.fga_list_objects_deadline),
        ("--fga-list-users-max-results", s.fga_list_users_max_results),
        ("--fga-list-users-deadline", s.fga_list_users_deadline),
    ):
        if value < 0:
            raise ConfigError(f"{option} must be 0 (no bound) or more, got {value}")
    if s.fga_cache_mib < 1:
        raise ConfigError(f"--fga-cache-mib must be 1 or more, got {s.fga_cache_mib}")
    if s.fga_max_condition_cost < 0:
        raise ConfigError(
            f"--fga-max-condition-cost must be 0 (no limit) or more, got {s.fga_max_condition_cost}"
        )
    try:
        parse_server_context(s.fga_server_context)
    except ValueError as exc:
        raise ConfigError(f"--fga-server-context: {exc}") from None


def _check_graphql_limits(s: Settings) -> None:
    for option, value in (
        ("--graphql-max-complexity", s.graphql_max_complexity),
        ("--graphql-max-depth", s.graphql_max_depth),
        ("--graphql-max-aliases", s.graphql_max_aliases),
        ("--graphql-max-body-bytes", s.graphql_max_body_bytes),
    ):
        if value < 1:
            raise ConfigError(f"{option} must be 1 or more, got {value}")


_COOKIE_DOMAIN = re.compile(r"\.?[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*")


# Startup rules in the order they are reported (the spec's numbering first).
def _check_social(s: Settings) -> None:
    try:
        parse_provider_urls(s.social_provider_urls)
    except ValueError as exc:
        raise ConfigError(f"--social-provider-urls: {exc}") from None
    if s.apple_client_secret:
        try:
            parse_apple_secret(s.apple_client_secret)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


_RULES = (
    _require_credentials,
    _require_database,
    _require_jwt,
    _require_secondary_jwt,
    _check_ports,
    _check_trusted_proxies,
    _check_url,
    _check_tracing,
    _check_hosts,
    _check_memory_store,
    _check_choices,
    _check_workers,
    _check_recent_sign_in,
    _check_request_timeout,
    _check_shutdown_timeout,
    _check_retention,
    _check_fga_store,
    _check_list_bounds,
    _check_database_replica,
    _check_openfga_api,
    _check_graphql_limits,
    _check_security,
    _check_mail,
    _check_mfa,
    _check_social,
)
