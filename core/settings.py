"""bastion's configuration: the flag table, the :class:`Settings` value and its rules.

All configuration is startup flags (kebab-case); nothing is read from environment
variables, env files, the database or the cache. :class:`Settings` IS the flag table:
every attribute is one flag (``--http-port`` -> ``settings.http_port``) and carries its
group and help text as field metadata, so the CLI, its ``--help`` and any docs read the
same declaration (:data:`FLAGS`).

This module is pure: it turns flag values (strings) into a :class:`Settings` and checks
the startup rules that need no I/O (:func:`validate`). Loading PEM keys and reading
files is the CLI's job (``transports.cli``).
"""

from __future__ import annotations

import enum
import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from core.redis_url import parse_redis_url
from core.sites import cross_site_origins, insecure_origins
from core.social.apple import parse_apple_secret
from core.social.providers import parse_provider_urls

__all__ = [
    "DATABASE_TYPES",
    "FLAGS",
    "FLAGS_BY_NAME",
    "JWT_TYPES",
    "NOSQL_ONLY_FLAGS",
    "NOT_IMPLEMENTED_FLAGS",
    "RENAMED_FLAGS",
    "ConfigError",
    "Flag",
    "Group",
    "Kind",
    "Settings",
    "convert",
    "settings_from_flags",
    "validate",
]


class ConfigError(Exception):
    """A startup configuration the server refuses; ``message`` is one line for stderr."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Group(enum.Enum):
    """Sections of ``--help``, in the order they are shown."""

    SERVER = "server"
    DATABASE = "database"
    CREDENTIALS = "credentials"
    TOKENS = "tokens"
    SECURITY = "security"
    SIGNUP_LOGIN = "sign-up and login"
    MFA = "multi-factor authentication"
    EMAIL = "email"
    SMS = "sms"
    SOCIAL = "social login"
    AUTHORIZATION = "roles and authorization"
    GRAPHQL = "graphql"
    PAGES = "pages and branding"
    WEBHOOKS = "webhooks"


class Kind(enum.Enum):
    """How a flag's text becomes a value."""

    #: ``--flag`` (true) or ``--flag=true|false``.
    BOOL = "bool"
    #: A decimal integer.
    INT = "int"
    #: A decimal number (rates).
    FLOAT = "float"
    #: Free text, kept as given.
    TEXT = "text"
    #: Comma-separated; items are stripped and empty items dropped.
    LIST = "list"
    #: PEM text; a value written on one line with literal ``\n`` escapes is unescaped.
    PEM = "pem"


#: Features that have not landed yet: giving one of these flags, with any value, stops
#: the server at startup ("... not implemented in this build"). Each later issue removes
#: the flags of the feature it implements, in the same change that implements it.
NOT_IMPLEMENTED_FLAGS: Final[frozenset[str]] = frozenset(
    {
        # server
        "grpc-insecure",
    }
)

#: Names that are refused with a pointer to what replaced them (None: no replacement).
RENAMED_FLAGS: Final[Mapping[str, str | None]] = {
    # v1-style names (spec: "not accepted")
    "database_url": "database-url",
    "database_type": "database-type",
    "env_file": None,
    "log_level": "log-level",
    "redis_url": "memory-store-url",
    # Authorizer 2.3 names that bastion spells differently
    "redis-url": "memory-store-url",
    "twilio-account-sid": "sms-account-sid",
    "twilio-api-key": "sms-api-key",
    "twilio-api-secret": "sms-api-secret",
    "twilio-sender": "sms-sender",
    "smtp-skip-tls-verification": "skip-tls-verification",
}

#: Flags of the document/cloud NoSQL backends, which bastion does not support.
NOSQL_ONLY_FLAGS: Final[frozenset[str]] = frozenset(
    {
        "couchbase-bucket",
        "couchbase-ram-quota",
        "couchbase-scope",
        "aws-region",
        "aws-access-key-id",
        "aws-secret-access-key",
    }
)

#: Accepted ``--database-type`` values and the SQL dialect each one means.
DATABASE_TYPES: Final[Mapping[str, str]] = {
    "sqlite": "sqlite",
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}

#: Database types Authorizer knows that bastion refuses (all NoSQL, plus libsql).
_NOSQL_DATABASE_TYPES: Final[frozenset[str]] = frozenset(
    {"mongodb", "arangodb", "cassandradb", "scylladb", "couchbase", "dynamodb"}
)

#: URL schemes (before any ``+driver``) per dialect.
_DIALECT_SCHEMES: Final[Mapping[str, str]] = {
    "sqlite": "sqlite",
    "postgres": "postgresql",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
}

JWT_TYPES: Final[tuple[str, ...]] = (
    "HS256",
    "HS384",
    "HS512",
    "RS256",
    "RS384",
    "RS512",
    "ES256",
    "ES384",
    "ES512",
)

_LOG_LEVELS: Final[Mapping[str, int]] = {"debug": 10, "info": 20, "warn": 30, "error": 40}

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class _FlagMeta:
    group: Group
    doc: str
    choices: tuple[str, ...]
    pem: bool
    shown_default: str | None


def _flag(
    default: _T,
    group: Group,
    doc: str,
    *,
    choices: tuple[str, ...] = (),
    pem: bool = False,
    shown_default: str | None = None,
) -> _T:
    meta = _FlagMeta(group, doc, choices, pem, shown_default)
    return field(default=default, metadata={"flag": meta})


_S = Group.SERVER
_D = Group.DATABASE
_C = Group.CREDENTIALS
_TK = Group.TOKENS
_SEC = Group.SECURITY
_SL = Group.SIGNUP_LOGIN
_M = Group.MFA
_E = Group.EMAIL
_SMS = Group.SMS
_SO = Group.SOCIAL
_A = Group.AUTHORIZATION
_G = Group.GRAPHQL
_P = Group.PAGES
_W = Group.WEBHOOKS

_REQUIRED = "required"
_NONE = "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Every startup flag, by its kebab-case name with ``-`` turned into ``_``.

    Build one from flag values with :func:`settings_from_flags` (which also validates);
    constructing it directly skips :func:`validate`. An empty ``url`` is filled in from
    ``host`` and ``http_port``; a trailing ``/`` of ``url`` is dropped.
    """

    # -- server
    env: str = _flag("", _S, "Environment name; shown in logs and meta, changes no behaviour.")
    host: str = _flag("0.0.0.0", _S, "Bind host of the HTTP and gRPC listeners.")  # noqa: S104
    http_port: int = _flag(8080, _S, "HTTP port (REST /v1, GraphQL, OAuth, health); 0 = any.")
    metrics_host: str = _flag("127.0.0.1", _S, "Bind host of the metrics listener.")
    metrics_port: int = _flag(8081, _S, "Metrics port (GET /metrics only); 0 = any free port.")
    enable_grpc: bool = _flag(True, _S, "Serve gRPC, and the REST gateway with it.")
    grpc_port: int = _flag(9091, _S, "gRPC port; 0 = any free port.")
    enable_grpc_reflection: bool = _flag(True, _S, "Serve gRPC server reflection.")
    grpc_tls_cert: str = _flag("", _S, "PEM certificate file for gRPC TLS (with --grpc-tls-key).")
    grpc_tls_key: str = _flag("", _S, "PEM private key file for gRPC TLS (with --grpc-tls-cert).")
    grpc_insecure: bool = _flag(False, _S, "Allow plaintext gRPC alongside TLS.")
    log_level: str = _flag(
        "info", _S, "Log level (bastion's default is info).", choices=tuple(_LOG_LEVELS)
    )
    url: str = _flag(
        "",
        _S,
        "Public base URL: token issuer, links in emails, redirects.",
        shown_default="http://HOST:HTTP-PORT, localhost for 0.0.0.0",
    )

    # -- database
    database_type: str = _flag(
        "", _D, "Main database type.", choices=tuple(DATABASE_TYPES), shown_default=_REQUIRED
    )
    database_url: str = _flag(
        "", _D, "Main database URL (SQLite: a file path or sqlite:///PATH).", shown_default=_NONE
    )
    database_host: str = _flag("", _D, "Database host (instead of --database-url).")
    database_port: int = _flag(0, _D, "Database port; 0 = the driver's default.")
    database_name: str = _flag("", _D, "Database name (instead of --database-url).")
    database_username: str = _flag("", _D, "Database user.")
    database_password: str = _flag("", _D, "Database password.")
    database_cert: str = _flag("", _D, "Client TLS certificate for the database.")
    database_ca_cert: str = _flag("", _D, "CA certificate for the database's TLS.")
    database_cert_key: str = _flag("", _D, "Client TLS key for the database.")
    migrate: str = _flag(
        "auto",
        _D,
        "auto: apply pending schema migrations at start; off: refuse to start on a schema "
        "behind this build (apply them with `bastion migrate`, e.g. with a user that may "
        "change the schema).",
        choices=("auto", "off"),
    )
    memory_store_url: str = _flag(
        "",
        _D,
        "Sessions/challenges/counters store: redis://, rediss://, "
        "redis+sentinel://h:p[,h:p]/service[/db], redis+cluster://h:p[,h:p] "
        "(rediss+ for TLS), or memory:// (one process).",
        shown_default="the main database",
    )

    # -- credentials
    client_id: str = _flag("", _C, "Application client id.", shown_default=_REQUIRED)
    client_secret: str = _flag("", _C, "Application client secret.", shown_default=_REQUIRED)
    admin_secret: str = _flag("", _C, "Super-admin secret (non-empty).", shown_default=_REQUIRED)
    disable_admin_header_auth: bool = _flag(
        False, _C, "Refuse the admin secret header; honour only the admin cookie."
    )

    # -- tokens
    jwt_type: str = _flag(
        "", _TK, "Token signing algorithm.", choices=JWT_TYPES, shown_default=_REQUIRED
    )
    jwt_secret: str = _flag("", _TK, "HMAC secret (HS256/HS384/HS512).")
    jwt_private_key: str = _flag("", _TK, "PEM private key (RS*/ES*).", pem=True)
    jwt_public_key: str = _flag("", _TK, "PEM public key (RS*/ES*).", pem=True)
    jwt_secondary_type: str = _flag(
        "", _TK, "Second accepted signing algorithm (key rotation).", choices=JWT_TYPES
    )
    jwt_secondary_secret: str = _flag("", _TK, "HMAC secret of the second key.")
    jwt_secondary_private_key: str = _flag("", _TK, "PEM private key of the second key.", pem=True)
    jwt_secondary_public_key: str = _flag("", _TK, "PEM public key of the second key.", pem=True)
    jwt_role_claim: str = _flag("role", _TK, "Claim that carries the user's roles.")
    custom_access_token_script: str = _flag(
        "", _TK, "JavaScript that adds claims to access tokens."
    )
    refresh_token_expires_in: int = _flag(2592000, _TK, "Refresh token lifetime in seconds.")
    default_authorize_response_type: str = _flag(
        "code",
        _TK,
        "Default response_type of /authorize (Authorizer's is token; implicit only when asked).",
        choices=("code", "token", "id_token"),
    )
    default_authorize_response_mode: str = _flag(
        "query",
        _TK,
        "Default response_mode of /authorize.",
        choices=("query", "fragment", "form_post", "web_message"),
    )
    backchannel_logout_uri: str = _flag("", _TK, "OIDC back-channel logout endpoint to notify.")

    # -- security
    allowed_origins: tuple[str, ...] = _flag(
        ("*",),
        _SEC,
        "Browser origins trusted with the user's cookies (CORS with credentials, CSRF, "
        "redirects), e.g. https://app.example.com,https://*.example.com. The server's own "
        "origin (--url) is always trusted. * = any origin may call without cookies (CORS "
        "answers *), cookie-carrying calls only from --url; redirects only to --url.",
    )
    trusted_proxies: tuple[str, ...] = _flag(
        (), _SEC, "Proxy networks (CIDRs or IPs) whose X-Forwarded-For is honoured."
    )
    rate_limit_rps: float = _flag(
        30.0, _SEC, "Requests per second per client IP (fractions allowed); <= 0 disables."
    )
    rate_limit_burst: int = _flag(20, _SEC, "Burst allowance per client IP.")
    rate_limit_fail_closed: bool = _flag(
        False, _SEC, "Answer 503 instead of passing requests when the limiter's store fails."
    )
    enable_hsts: bool = _flag(False, _SEC, "Send Strict-Transport-Security.")
    disable_csp: bool = _flag(False, _SEC, "Do not send Content-Security-Policy.")
    cookie_domain: str = _flag(
        "", _SEC, "Domain of the shared session cookie.", shown_default="derived from --url"
    )
    app_cookie_secure: bool = _flag(True, _SEC, "Secure attribute of the session cookies.")
    app_cookie_same_site: str = _flag(
        "auto",
        _SEC,
        "SameSite of the session cookies. auto = None (and Secure) when --allowed-origins "
        "lists an origin on another site than --url, else Lax.",
        choices=("auto", "none", "lax", "strict"),
    )
    admin_cookie_secure: bool = _flag(True, _SEC, "Secure attribute of the admin cookie.")

    # -- sign-up and login
    enable_signup: bool = _flag(True, _SL, "Allow sign-up.")
    enable_basic_authentication: bool = _flag(True, _SL, "Email + password login.")
    enable_email_verification: bool = _flag(False, _SL, "Require email verification.")
    enable_magic_link_login: bool = _flag(False, _SL, "Passwordless magic-link login.")
    enable_strong_password: bool = _flag(True, _SL, "Enforce the strong password policy.")
    enable_mobile_basic_authentication: bool = _flag(True, _SL, "Phone + password login.")
    enable_phone_verification: bool = _flag(False, _SL, "Require phone verification.")
    reset_password_url: str = _flag("", _SL, "Base of password-reset links.")

    # -- multi-factor authentication
    enable_mfa: bool = _flag(False, _M, "Offer multi-factor authentication.")
    enforce_mfa: bool = _flag(True, _M, "Require MFA for every user (once MFA is enabled).")
    enable_totp_login: bool = _flag(False, _M, "Authenticator-app (TOTP) codes.")
    enable_email_otp: bool = _flag(False, _M, "One-time codes by email.")
    enable_sms_otp: bool = _flag(False, _M, "One-time codes by SMS.")

    # -- email
    smtp_host: str = _flag("", _E, "SMTP host.")
    smtp_port: int = _flag(0, _E, "SMTP port.")
    smtp_username: str = _flag("", _E, "SMTP user.")
    smtp_password: str = _flag("", _E, "SMTP password.")
    smtp_sender_email: str = _flag("", _E, "From address.")
    smtp_sender_name: str = _flag("", _E, "From name.")
    smtp_local_name: str = _flag("", _E, "Name sent in HELO/EHLO.")
    skip_tls_verification: bool = _flag(False, _E, "Do not verify the SMTP server's certificate.")

    # -- sms
    sms_account_sid: str = _flag("", _SMS, "SMS provider account sid.")
    sms_api_key: str = _flag("", _SMS, "SMS provider API key.")
    sms_api_secret: str = _flag("", _SMS, "SMS provider API secret.")
    sms_sender: str = _flag("", _SMS, "SMS sender number or id.")
    sms_api_url: str = _flag(
        "", _SMS, "SMS provider API base URL.", shown_default="the provider's public API"
    )

    # -- social login
    google_client_id: str = _flag("", _SO, "Google OAuth client id.")
    google_client_secret: str = _flag("", _SO, "Google OAuth client secret.")
    google_scopes: tuple[str, ...] = _flag(("openid", "profile", "email"), _SO, "Google scopes.")
    github_client_id: str = _flag("", _SO, "GitHub OAuth client id.")
    github_client_secret: str = _flag("", _SO, "GitHub OAuth client secret.")
    github_scopes: tuple[str, ...] = _flag(("read:user", "user:email"), _SO, "GitHub scopes.")
    facebook_client_id: str = _flag("", _SO, "Facebook OAuth client id.")
    facebook_client_secret: str = _flag("", _SO, "Facebook OAuth client secret.")
    facebook_scopes: tuple[str, ...] = _flag(("public_profile", "email"), _SO, "Facebook scopes.")
    microsoft_client_id: str = _flag("", _SO, "Microsoft OAuth client id.")
    microsoft_client_secret: str = _flag("", _SO, "Microsoft OAuth client secret.")
    microsoft_scopes: tuple[str, ...] = _flag(
        ("openid", "profile", "email"), _SO, "Microsoft scopes."
    )
    microsoft_tenant_id: str = _flag("common", _SO, "Microsoft tenant.")
    twitch_client_id: str = _flag("", _SO, "Twitch OAuth client id.")
    twitch_client_secret: str = _flag("", _SO, "Twitch OAuth client secret.")
    twitch_scopes: tuple[str, ...] = _flag(("openid", "user:read:email"), _SO, "Twitch scopes.")
    linkedin_client_id: str = _flag("", _SO, "LinkedIn OAuth client id.")
    linkedin_client_secret: str = _flag("", _SO, "LinkedIn OAuth client secret.")
    linkedin_scopes: tuple[str, ...] = _flag(
        ("openid", "profile", "email"), _SO, "LinkedIn scopes (OpenID Connect)."
    )
    apple_client_id: str = _flag("", _SO, "Apple client id.")
    apple_client_secret: str = _flag(
        "", _SO, "Apple: <team id>:<key id>:<PEM private key>, or a signed client-secret JWT."
    )
    apple_scopes: tuple[str, ...] = _flag(("email", "name"), _SO, "Apple scopes.")
    discord_client_id: str = _flag("", _SO, "Discord OAuth client id.")
    discord_client_secret: str = _flag("", _SO, "Discord OAuth client secret.")
    discord_scopes: tuple[str, ...] = _flag(("identify", "email"), _SO, "Discord scopes.")
    twitter_client_id: str = _flag("", _SO, "Twitter OAuth client id.")
    twitter_client_secret: str = _flag("", _SO, "Twitter OAuth client secret.")
    twitter_scopes: tuple[str, ...] = _flag(
        ("tweet.read", "users.read", "users.email"), _SO, "Twitter (X) scopes."
    )
    roblox_client_id: str = _flag("", _SO, "Roblox OAuth client id.")
    roblox_client_secret: str = _flag("", _SO, "Roblox OAuth client secret.")
    roblox_scopes: tuple[str, ...] = _flag(("openid", "profile"), _SO, "Roblox scopes.")
    social_provider_urls: tuple[str, ...] = _flag(
        (),
        _SO,
        "Advanced: provider=URL pairs; that provider's endpoints and ID-token issuer move to "
        "URL, same paths (a local test double, an egress proxy).",
        shown_default=_NONE,
    )

    # -- roles and authorization
    roles: tuple[str, ...] = _flag(("user",), _A, "Roles a user may hold.")
    default_roles: tuple[str, ...] = _flag(("user",), _A, "Roles given at sign-up.")
    protected_roles: tuple[str, ...] = _flag((), _A, "Roles only an admin may grant.")
    fga_store: str = _flag(
        "",
        _A,
        "Store of the authorization engine.",
        choices=("sqlite", "postgres", "mysql", "memory", "none"),
        shown_default="the main database",
    )
    fga_store_url: str = _flag("", _A, "URL of --fga-store.")
    allow_user_contextual_tuples: bool = _flag(
        False,
        _A,
        "Honour contextual tuples in check_permissions from any signed-in user, not only "
        "a super-admin: a user may then assert any tuple, about itself or anyone, for its "
        "own checks (the answer is what the user chose). Off: a non-admin gets 403.",
    )

    # -- graphql
    enable_graphql_introspection: bool = _flag(True, _G, "Allow schema introspection.")
    graphql_max_complexity: int = _flag(300, _G, "Maximum query complexity.")
    graphql_max_depth: int = _flag(15, _G, "Maximum query depth.")
    graphql_max_aliases: int = _flag(30, _G, "Maximum aliases per query.")
    graphql_max_body_bytes: int = _flag(1048576, _G, "Maximum request body in bytes.")

    # -- pages and branding
    enable_login_page: bool = _flag(True, _P, "Serve the login page.")
    enable_playground: bool = _flag(True, _P, "Serve the GraphQL playground.")
    organization_name: str = _flag(
        "bastion", _P, "Organization name shown to users (pages and mails)."
    )
    organization_logo: str = _flag(
        "https://authorizer.dev/images/logo.png", _P, "Organization logo URL."
    )

    # -- webhooks
    webhook_allow_private_targets: bool = _flag(
        False, _W, "Allow webhooks to private and loopback addresses."
    )

    def __post_init__(self) -> None:
        url = self.url or _default_url(self.host, self.http_port)
        parts = urlsplit(url)
        if parts.netloc and parts.path.endswith("/") and not (parts.query or parts.fragment):
            url = url.rstrip("/")
        object.__setattr__(self, "url", url)

    @property
    def is_hmac(self) -> bool:
        """Tokens are signed with a shared secret (HS*), not a key pair."""
        return self.jwt_type.startswith("HS")

    @property
    def database_dialect(self) -> str:
        """``sqlite``, ``postgresql`` or ``mysql`` (MariaDB included)."""
        return DATABASE_TYPES[self.database_type]

    @property
    def session_cookie_same_site(self) -> str:
        """``None``, ``Lax`` or ``Strict``: what the session cookies carry."""
        chosen = self.app_cookie_same_site.lower()
        if chosen == "auto":
            chosen = "none" if cross_site_origins(self.allowed_origins, self.url) else "lax"
        return {"none": "None", "lax": "Lax", "strict": "Strict"}[chosen]

    @property
    def session_cookie_secure(self) -> bool:
        """Browsers refuse ``SameSite=None`` without ``Secure``: it is then always set."""
        return self.app_cookie_secure or self.session_cookie_same_site == "None"

    def startup_warnings(self) -> list[str]:
        """What start-up logs as a warning: allowed, but probably not what was meant."""
        return [
            f"--allowed-origins lists {origin}: plain http outside this machine, so the "
            "cookies and tokens it is trusted with travel unencrypted"
            for origin in insecure_origins(self.allowed_origins)
        ]

    @property
    def memory_store_kind(self) -> str:
        """``redis``, ``memory`` (one process only) or ``sql`` (the main database)."""
        if not self.memory_store_url:
            return "sql"
        scheme = urlsplit(self.memory_store_url).scheme.lower()
        return "memory" if scheme == "memory" else "redis"

    @property
    def trusted_proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """``trusted_proxies`` as networks (a plain IP is a /32 or /128)."""
        return tuple(ipaddress.ip_network(entry, strict=False) for entry in self.trusted_proxies)

    @property
    def log_level_number(self) -> int:
        """``log_level`` as a :mod:`logging` level number."""
        return _LOG_LEVELS[self.log_level]

    @property
    def rate_limit_enabled(self) -> bool:
        return self.rate_limit_rps > 0


def _default_url(host: str, port: int) -> str:
    if host in ("", "0.0.0.0", "::"):  # noqa: S104
        name = "localhost"
    elif ":" in host:
        name = f"[{host}]"
    else:
        name = host
    return f"http://{name}:{port}"


# --------------------------------------------------------------------- the flag table


@dataclass(frozen=True, slots=True, kw_only=True)
class Flag:
    """One row of the flag table."""

    name: str
    attribute: str
    kind: Kind
    default: bool | int | str | tuple[str, ...]
    group: Group
    doc: str
    choices: tuple[str, ...]
    #: The default as ``--help`` shows it.
    shown_default: str

    @property
    def option(self) -> str:
        return f"--{self.name}"

    @property
    def implemented(self) -> bool:
        return self.name not in NOT_IMPLEMENTED_FLAGS


def _kind_of(default: object, pem: bool) -> Kind:
    if pem:
        return Kind.PEM
    if isinstance(default, bool):
        return Kind.BOOL
    if isinstance(default, int):
        return Kind.INT
    if isinstance(default, float):
        return Kind.FLOAT
    if isinstance(default, tuple):
        return Kind.LIST
    return Kind.TEXT


def _show(default: object) -> str:
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, tuple):
        return ",".join(default) if default else _NONE
    if default == "":
        return _NONE
    return str(default)


def _build_table() -> tuple[Flag, ...]:
    table = []
    for f in fields(Settings):
        meta: _FlagMeta = f.metadata["flag"]
        table.append(
            Flag(
                name=f.name.replace("_", "-"),
                attribute=f.name,
                kind=_kind_of(f.default, meta.pem),
                default=f.default,  # type: ignore[arg-type]  # declared by _flag above
                group=meta.group,
                doc=meta.doc,
                choices=meta.choices,
                shown_default=meta.shown_default or _show(f.default),
            )
        )
    return tuple(table)


#: Every flag, in declaration order.
FLAGS: Final[tuple[Flag, ...]] = _build_table()
FLAGS_BY_NAME: Final[Mapping[str, Flag]] = {flag.name: flag for flag in FLAGS}


# ------------------------------------------------------------------ values and rules

_INT = re.compile(r"-?[0-9]+")
_BOOLS: Final[Mapping[str, bool]] = {"true": True, "false": False}


def convert(flag: Flag, raw: str) -> bool | int | float | str | tuple[str, ...]:
    """Turn one flag's text into its value, or raise :class:`ConfigError`."""
    if flag.kind is Kind.BOOL:
        try:
            return _BOOLS[raw.strip().lower()]
        except KeyError:
            raise ConfigError(f"{flag.option} expects true or false, got {raw!r}") from None
    if flag.kind is Kind.INT:
        text = raw.strip()
        if not _INT.fullmatch(text):
            raise ConfigError(f"{flag.option} expects an integer, got {raw!r}")
        return int(text)
    if flag.kind is Kind.FLOAT:
        try:
            number = float(raw.strip())
        except ValueError:
            raise ConfigError(f"{flag.option} expects a number, got {raw!r}") from None
        if not math.isfinite(number):
            raise ConfigError(f"{flag.option} expects a finite number, got {raw!r}")
        return number
    if flag.kind is Kind.LIST:
        return tuple(item.strip() for item in raw.split(",") if item.strip())
    if flag.kind is Kind.PEM and "\\n" in raw and "\n" not in raw:
        return raw.replace("\\n", "\n")
    return raw


def settings_from_flags(values: Mapping[str, str]) -> Settings:
    """Build and validate :class:`Settings` from flag texts keyed by kebab-case name.

    Only the flags present in ``values`` were given; the rest take their defaults. A
    given flag whose feature is not implemented is refused whatever its value.
    """
    unknown = [name for name in values if name not in FLAGS_BY_NAME]
    if unknown:
        raise ConfigError(f"unknown flag --{unknown[0]}")
    refused = [flag.option for flag in FLAGS if flag.name in values and not flag.implemented]
    if refused:
        raise ConfigError(f"{refused[0]} is not implemented in this build")
    kwargs: dict[str, Any] = {
        FLAGS_BY_NAME[name].attribute: convert(FLAGS_BY_NAME[name], raw)
        for name, raw in values.items()
    }
    settings = Settings(**kwargs)
    validate(settings)
    return settings


def validate(settings: Settings) -> None:
    """Check the startup rules that need no I/O; raise the first broken one."""
    for rule in _RULES:
        rule(settings)


def _require_credentials(s: Settings) -> None:
    if not s.admin_secret:
        raise ConfigError("--admin-secret is required and must not be empty.")
    if not s.client_id:
        raise ConfigError("--client-id is required and must not be empty.")
    if not s.client_secret:
        raise ConfigError("--client-secret is required and must not be empty.")


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
        kind = "NoSQL databases are" if s.database_type in _NOSQL_DATABASE_TYPES else "it is"
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
    if _DIALECT_SCHEMES.get(scheme.split("+", 1)[0]) != dialect:
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
    if s.http_port == 0 and s.url == _default_url(s.host, 0):
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
    _check_hosts,
    _check_memory_store,
    _check_choices,
    _check_fga_store,
    _check_graphql_limits,
    _check_security,
    _check_mail,
    _check_mfa,
    _check_social,
)
