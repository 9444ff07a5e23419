"""The flag table as data: :class:`Settings` declares every startup flag, its default,
group and help text, and the values derived from them."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from bastion.core.networks import authority
from bastion.core.settings.retention import RetentionFlags
from bastion.core.settings.social import SocialFlags
from bastion.core.settings.vocabulary import (
    DATABASE_TYPES,
    JWT_TYPES,
    LOG_LEVELS,
    NONE_SHOWN,
    REQUIRED_SHOWN,
    Group,
    flag_field,
)
from bastion.core.sites import cross_site_origins

_S = Group.SERVER
_D = Group.DATABASE
_C = Group.CREDENTIALS
_TK = Group.TOKENS
_SEC = Group.SECURITY
_SL = Group.SIGNUP_LOGIN
_M = Group.MFA
_E = Group.EMAIL
_SMS = Group.SMS
_A = Group.AUTHORIZATION
_G = Group.GRAPHQL
_P = Group.PAGES
_W = Group.WEBHOOKS


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings(SocialFlags, RetentionFlags):
    """Every startup flag, by its kebab-case name with ``-`` turned into ``_``.

    Build one from flag values with :func:`settings_from_flags` (which also validates);
    constructing it directly skips :func:`validate`. An empty ``url`` is filled in from
    ``host`` and ``http_port``; a trailing ``/`` of ``url`` is dropped.
    """

    # -- server
    env: str = flag_field("", _S, "Environment name; shown in logs and meta, changes no behaviour.")
    host: str = flag_field("0.0.0.0", _S, "Bind host of the HTTP and gRPC listeners.")  # noqa: S104
    http_port: int = flag_field(8080, _S, "HTTP port (REST /v1, GraphQL, OAuth, health); 0 = any.")
    http_server: str = flag_field(
        "h11",
        _S,
        "HTTP server: h11 (bastion's own HTTP/1.1 server, the fast one: the name is "
        "historical, it parses with llhttp) or hypercorn (adds HTTP/2 and h2c).",
        choices=("h11", "hypercorn"),
    )
    workers: int = flag_field(
        1,
        _S,
        "Server processes sharing the HTTP and gRPC ports (one per core for throughput); "
        "/metrics reports them all. Needs --http-server h11 and a shared memory store "
        "(Redis or the database), not memory://.",
    )
    request_timeout: float = flag_field(
        10.0,
        _S,
        "Seconds a request (HTTP or gRPC) may take; past it the answer is 503 unavailable "
        "with Retry-After (gRPC: UNAVAILABLE), and nothing was written (a transaction in "
        "flight is waited for; one that committed is answered). Database statements and "
        "lock waits inherit it (statement_timeout and lock_timeout on PostgreSQL, "
        "innodb_lock_wait_timeout and lock_wait_timeout on MySQL/MariaDB, busy_timeout on "
        "SQLite).",
    )
    shutdown_timeout: float = flag_field(
        10.0,
        _S,
        "Seconds a stop (SIGTERM or SIGINT) gives the HTTP requests and gRPC calls in "
        "flight to finish; past it they are cut off and the process exits.",
    )
    metrics_host: str = flag_field("127.0.0.1", _S, "Bind host of the metrics listener.")
    metrics_port: int = flag_field(8081, _S, "Metrics port (GET /metrics only); 0 = any free port.")
    enable_grpc: bool = flag_field(True, _S, "Serve gRPC, and the REST gateway with it.")
    grpc_port: int = flag_field(9091, _S, "gRPC port; 0 = any free port.")
    enable_grpc_reflection: bool = flag_field(True, _S, "Serve gRPC server reflection.")
    tls_cert_file: str = flag_field(
        "", _S, "PEM certificate chain file: the HTTP listener serves HTTPS (with --tls-key-file)."
    )
    tls_key_file: str = flag_field("", _S, "PEM private key file of --tls-cert-file.")
    grpc_tls_cert: str = flag_field(
        "", _S, "PEM certificate file for gRPC TLS (with --grpc-tls-key)."
    )
    grpc_tls_key: str = flag_field(
        "", _S, "PEM private key file for gRPC TLS (with --grpc-tls-cert)."
    )
    grpc_insecure: bool = flag_field(False, _S, "Allow plaintext gRPC alongside TLS.")
    log_level: str = flag_field(
        "info", _S, "Log level (bastion's default is info).", choices=tuple(LOG_LEVELS)
    )
    log_format: str = flag_field(
        "json",
        _S,
        "json: one JSON object per line (for collectors); text: one readable line per event.",
        choices=("json", "text"),
    )
    access_log: bool = flag_field(
        True, _S, "One line per HTTP request (logger bastion.access, at info level)."
    )
    otel_traces_endpoint: str = flag_field(
        "", _S, "OTLP/HTTP URL to send traces to (…:4318/v1/traces); empty: no tracing."
    )
    otel_traces_sample_ratio: float = flag_field(
        1.0, _S, "Share of new traces kept, 0 to 1 (a caller's traceparent decides its own)."
    )
    url: str = flag_field(
        "",
        _S,
        "Public base URL: token issuer, links in emails, redirects.",
        shown_default="http://HOST:HTTP-PORT, localhost for 0.0.0.0",
    )

    # -- database
    database_type: str = flag_field(
        "", _D, "Main database type.", choices=tuple(DATABASE_TYPES), shown_default=REQUIRED_SHOWN
    )
    database_url: str = flag_field(
        "",
        _D,
        "Main database URL (SQLite: a file path or sqlite:///PATH).",
        shown_default=NONE_SHOWN,
    )
    database_host: str = flag_field("", _D, "Database host (instead of --database-url).")
    database_port: int = flag_field(0, _D, "Database port; 0 = the driver's default.")
    database_name: str = flag_field("", _D, "Database name (instead of --database-url).")
    database_username: str = flag_field("", _D, "Database user.")
    database_password: str = flag_field("", _D, "Database password.")
    database_cert: str = flag_field("", _D, "Client TLS certificate for the database.")
    database_ca_cert: str = flag_field("", _D, "CA certificate for the database's TLS.")
    database_cert_key: str = flag_field("", _D, "Client TLS key for the database.")
    database_replica_url: str = flag_field(
        "",
        _D,
        "A read replica of the main database (a PostgreSQL or MySQL/MariaDB streaming "
        "standby): the authorization engine reads its tuples and changelog there; writes "
        "and reads that must see a write stay on the primary. Unreachable: read the primary.",
        shown_default=NONE_SHOWN,
    )
    migrate: str = flag_field(
        "auto",
        _D,
        "auto: apply pending schema migrations at start; off: refuse to start on a schema "
        "behind this build (apply them with `bastion migrate`, e.g. with a user that may "
        "change the schema).",
        choices=("auto", "off"),
    )
    memory_store_url: str = flag_field(
        "",
        _D,
        "Sessions/challenges/counters store: redis://, rediss://, "
        "redis+sentinel://h:p[,h:p]/service[/db], redis+cluster://h:p[,h:p] "
        "(rediss+ for TLS), or memory:// (one process).",
        shown_default="the main database",
    )

    # -- credentials
    client_id: str = flag_field("", _C, "Application client id.", shown_default=REQUIRED_SHOWN)
    client_secret: str = flag_field(
        "", _C, "Application client secret.", shown_default=REQUIRED_SHOWN
    )
    admin_secret: str = flag_field(
        "", _C, "Super-admin secret (non-empty).", shown_default=REQUIRED_SHOWN
    )
    admin_secret_previous: str = flag_field(
        "", _C, "Rotation: the admin secret being replaced, still accepted until removed."
    )
    client_secret_previous: str = flag_field(
        "",
        _C,
        "Rotation: the client secret being replaced, still accepted from relying parties "
        "and still opening authenticator secrets sealed under it (resealed when next read).",
    )
    disable_admin_header_auth: bool = flag_field(
        False, _C, "Refuse the admin secret header; honour only the admin cookie."
    )

    # -- tokens
    jwt_type: str = flag_field(
        "", _TK, "Token signing algorithm.", choices=JWT_TYPES, shown_default=REQUIRED_SHOWN
    )
    jwt_secret: str = flag_field("", _TK, "HMAC secret (HS256/HS384/HS512).")
    jwt_private_key: str = flag_field("", _TK, "PEM private key (RS*/ES*).", pem=True)
    jwt_public_key: str = flag_field("", _TK, "PEM public key (RS*/ES*).", pem=True)
    jwt_secondary_type: str = flag_field(
        "", _TK, "Second accepted signing algorithm (key rotation).", choices=JWT_TYPES
    )
    jwt_secondary_secret: str = flag_field("", _TK, "HMAC secret of the second key.")
    jwt_secondary_private_key: str = flag_field(
        "", _TK, "PEM private key of the second key.", pem=True
    )
    jwt_secondary_public_key: str = flag_field(
        "", _TK, "PEM public key of the second key.", pem=True
    )
    jwt_role_claim: str = flag_field("role", _TK, "Claim that carries the user's roles.")
    custom_access_token_script: str = flag_field(
        "", _TK, "JavaScript that adds claims to access tokens."
    )
    refresh_token_expires_in: int = flag_field(2592000, _TK, "Refresh token lifetime in seconds.")
    default_authorize_response_type: str = flag_field(
        "code",
        _TK,
        "Default response_type of /authorize (Authorizer's is token; implicit only when asked).",
        choices=("code", "token", "id_token"),
    )
    default_authorize_response_mode: str = flag_field(
        "query",
        _TK,
        "Default response_mode of /authorize.",
        choices=("query", "fragment", "form_post", "web_message"),
    )
    backchannel_logout_uri: str = flag_field(
        "", _TK, "OIDC back-channel logout endpoint to notify."
    )

    # -- security
    allowed_origins: tuple[str, ...] = flag_field(
        ("*",),
        _SEC,
        "Browser origins trusted with the user's cookies (CORS with credentials, CSRF, "
        "redirects), e.g. https://app.example.com,https://*.example.com. The server's own "
        "origin (--url) is always trusted. * = any origin may call without cookies (CORS "
        "answers *), cookie-carrying calls only from --url; redirects only to --url.",
    )
    trusted_proxies: tuple[str, ...] = flag_field(
        (), _SEC, "Proxy networks (CIDRs or IPs) whose X-Forwarded-For is honoured."
    )
    rate_limit_rps: float = flag_field(
        30.0, _SEC, "Requests per second per client IP (fractions allowed); <= 0 disables."
    )
    rate_limit_burst: int = flag_field(20, _SEC, "Burst allowance per client IP.")
    recent_sign_in_seconds: int = flag_field(
        300,
        _SEC,
        "How recent a sign-in (or second factor) must be for update_profile to change the "
        "email address or phone number without old_password: a stolen or long-lived token "
        "alone cannot take over the account's recovery address.",
    )
    rate_limit_fail_closed: bool = flag_field(
        False, _SEC, "Answer 503 instead of passing requests when the limiter's store fails."
    )
    enable_hsts: bool = flag_field(False, _SEC, "Send Strict-Transport-Security.")
    disable_csp: bool = flag_field(False, _SEC, "Do not send Content-Security-Policy.")
    cookie_domain: str = flag_field(
        "", _SEC, "Domain of the shared session cookie.", shown_default="derived from --url"
    )
    app_cookie_secure: bool = flag_field(True, _SEC, "Secure attribute of the session cookies.")
    app_cookie_same_site: str = flag_field(
        "auto",
        _SEC,
        "SameSite of the session cookies. auto = None (and Secure) when --allowed-origins "
        "lists an origin on another site than --url, else Lax.",
        choices=("auto", "none", "lax", "strict"),
    )
    admin_cookie_secure: bool = flag_field(True, _SEC, "Secure attribute of the admin cookie.")

    # -- sign-up and login
    enable_signup: bool = flag_field(True, _SL, "Allow sign-up.")
    enable_basic_authentication: bool = flag_field(True, _SL, "Email + password login.")
    enable_email_verification: bool = flag_field(False, _SL, "Require email verification.")
    enable_magic_link_login: bool = flag_field(False, _SL, "Passwordless magic-link login.")
    enable_strong_password: bool = flag_field(True, _SL, "Enforce the strong password policy.")
    enable_mobile_basic_authentication: bool = flag_field(True, _SL, "Phone + password login.")
    enable_phone_verification: bool = flag_field(False, _SL, "Require phone verification.")
    reset_password_url: str = flag_field("", _SL, "Base of password-reset links.")

    # -- multi-factor authentication
    enable_mfa: bool = flag_field(False, _M, "Offer multi-factor authentication.")
    enforce_mfa: bool = flag_field(True, _M, "Require MFA for every user (once MFA is enabled).")
    enable_totp_login: bool = flag_field(False, _M, "Authenticator-app (TOTP) codes.")
    enable_email_otp: bool = flag_field(False, _M, "One-time codes by email.")
    enable_sms_otp: bool = flag_field(False, _M, "One-time codes by SMS.")
    enable_passkeys: bool = flag_field(
        False,
        _M,
        "Passkeys (WebAuthn): users add them while signed in, then sign in with one alone "
        "or use one as the second factor after a password.",
    )
    webauthn_rp_id: str = flag_field(
        "", _M, "WebAuthn relying-party id (a registrable domain); empty = the host of --url."
    )
    webauthn_rp_name: str = flag_field(
        "", _M, "Relying-party name shown by authenticators; empty = --organization-name."
    )

    # -- email
    smtp_host: str = flag_field("", _E, "SMTP host.")
    smtp_port: int = flag_field(0, _E, "SMTP port.")
    smtp_username: str = flag_field("", _E, "SMTP user.")
    smtp_password: str = flag_field("", _E, "SMTP password.")
    smtp_sender_email: str = flag_field("", _E, "From address.")
    smtp_sender_name: str = flag_field("", _E, "From name.")
    smtp_local_name: str = flag_field("", _E, "Name sent in HELO/EHLO.")
    skip_tls_verification: bool = flag_field(
        False, _E, "Do not verify the SMTP server's certificate."
    )

    # -- sms
    sms_account_sid: str = flag_field("", _SMS, "SMS provider account sid.")
    sms_api_key: str = flag_field("", _SMS, "SMS provider API key.")
    sms_api_secret: str = flag_field("", _SMS, "SMS provider API secret.")
    sms_sender: str = flag_field("", _SMS, "SMS sender number or id.")
    sms_api_url: str = flag_field(
        "", _SMS, "SMS provider API base URL.", shown_default="the provider's public API"
    )

    # -- roles and authorization
    roles: tuple[str, ...] = flag_field(("user",), _A, "Roles a user may hold.")
    default_roles: tuple[str, ...] = flag_field(("user",), _A, "Roles given at sign-up.")
    protected_roles: tuple[str, ...] = flag_field((), _A, "Roles only an admin may grant.")
    fga_store: str = flag_field(
        "",
        _A,
        "Store of the authorization engine.",
        choices=("sqlite", "postgres", "mysql", "memory", "none"),
        shown_default="the main database",
    )
    fga_store_url: str = flag_field("", _A, "URL of --fga-store.")
    openfga_api_key: str = flag_field(
        "",
        _A,
        "Serve OpenFGA's own HTTP API (/stores/...) on the HTTP port, for OpenFGA's SDKs "
        "and CLI; requests must carry Authorization: Bearer KEY. Off when empty.",
    )
    fga_cache_mib: int = flag_field(
        512,
        _A,
        "MiB of tuple reads each server process keeps cached for the authorization "
        "engine, every store together (least recently used out; the store is read on "
        "demand, never loaded whole).",
    )
    fga_list_objects_max_results: int = flag_field(
        1000,
        _A,
        "Objects in a ListObjects answer at most (OpenFGA's --listObjects-max-results); "
        "0: no bound. StreamedListObjects is not bounded.",
    )
    fga_list_objects_deadline: float = flag_field(
        3.0,
        _A,
        "Seconds a ListObjects (streamed or not, and list_permissions) may evaluate; then "
        "it answers with what it has confirmed (OpenFGA's --listObjects-deadline); 0: none.",
    )
    fga_list_users_max_results: int = flag_field(
        1000,
        _A,
        "Users in a ListUsers answer at most (OpenFGA's --listUsers-max-results); 0: no bound.",
    )
    fga_list_users_deadline: float = flag_field(
        3.0,
        _A,
        "Seconds a ListUsers may evaluate; then it answers with the users it has met that "
        "Check confirms (OpenFGA's --listUsers-deadline); 0: none.",
    )
    allow_user_contextual_tuples: bool = flag_field(
        False,
        _A,
        "Honour contextual tuples in check_permissions from any signed-in user, not only "
        "a super-admin: a user may then assert any tuple, about itself or anyone, for its "
        "own checks (the answer is what the user chose). Off: a non-admin gets 403.",
    )
    allow_user_context: bool = flag_field(
        False,
        _A,
        "Honour a request context (condition parameters) in check_permissions and "
        "list_permissions from any signed-in user, not only a super-admin: the user then "
        "chooses what its conditions see (the time, its address). Off: a non-admin's "
        "context gets 403. See --fga-server-context.",
    )
    fga_server_context: tuple[str, ...] = flag_field(
        (),
        _A,
        "Condition parameters the server fills in check_permissions, list_permissions and "
        "_fga_list_users, over what any caller (an admin too) sends: NAME=SOURCE, or SOURCE "
        "for a parameter of that name; SOURCE is current_time (the server's clock) or "
        "client_ip (the caller's address after --trusted-proxies), e.g. "
        "current_time,ip=client_ip.",
    )
    fga_max_condition_cost: int = flag_field(
        100,
        _A,
        "Cost of one condition evaluation at most, counted as cel-go counts it (OpenFGA's "
        "--maxConditionEvaluationCost); past it the check fails as any condition error "
        "(400, or the check's own error in a batch). 0: no limit (the request's deadline "
        "still ends an evaluation).",
    )

    # -- graphql
    enable_graphql_introspection: bool = flag_field(True, _G, "Allow schema introspection.")
    graphql_max_complexity: int = flag_field(300, _G, "Maximum query complexity.")
    graphql_max_depth: int = flag_field(15, _G, "Maximum query depth.")
    graphql_max_aliases: int = flag_field(30, _G, "Maximum aliases per query.")
    graphql_max_body_bytes: int = flag_field(1048576, _G, "Maximum request body in bytes.")

    # -- pages and branding
    enable_login_page: bool = flag_field(True, _P, "Serve the login page.")
    enable_playground: bool = flag_field(True, _P, "Serve the GraphQL playground.")
    organization_name: str = flag_field(
        "bastion", _P, "Organization name shown to users (pages and mails)."
    )
    organization_logo: str = flag_field(
        "https://authorizer.dev/images/logo.png", _P, "Organization logo URL."
    )

    # -- webhooks
    webhook_secret: str = flag_field(
        "",
        _W,
        "Signs webhook deliveries (X-Authorizer-Signature, HMAC-SHA256 of timestamp.body).",
        shown_default="--client-secret, as Authorizer signs",
    )
    webhook_allow_private_targets: bool = flag_field(
        False, _W, "Allow webhooks to private and loopback addresses."
    )

    def __post_init__(self) -> None:
        url = self.url or default_url(self.host, self.http_port)
        parts = urlsplit(url)
        if parts.netloc and parts.path.endswith("/") and not (parts.query or parts.fragment):
            url = url.rstrip("/")
        object.__setattr__(self, "url", url)

    @property
    def webhook_signing_secret(self) -> str:
        return self.webhook_secret or self.client_secret

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
        return LOG_LEVELS[self.log_level]

    @property
    def rate_limit_enabled(self) -> bool:
        return self.rate_limit_rps > 0


def default_url(host: str, port: int) -> str:
    name = "localhost" if host in ("", "0.0.0.0", "::") else host  # noqa: S104
    return f"http://{authority(name, port)}"
