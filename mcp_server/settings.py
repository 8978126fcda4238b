"""Every setting of the ``MCP_SERVER`` dict, with its default, read in this module alone.

    MCP_SERVER = {"NAME": "my-project", "PAGE_SIZE": 50}

Dotted paths name callables (``"myapp.observability.report"``). A leaf: it reads Django's
settings and imports nothing of the package (``site.py`` rebuilds the default server when they
change).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    # Identity of the default server, as sent in the initialize result.
    "NAME": "django-mcp-server",
    "TITLE": None,
    "VERSION": "0.1.0",
    "DESCRIPTION": None,
    "INSTRUCTIONS": None,
    "WEBSITE_URL": None,
    "ICONS": None,
    # Capabilities dict; None means tools, prompts, resources (with listChanged) and logging.
    "CAPABILITIES": None,
    # Split list results into pages of this many items; None sends everything at once.
    "PAGE_SIZE": None,
    # Cache hints on list and read results (SEP-2549); None leaves them out.
    "TTL_MS": None,
    "CACHE_SCOPE": None,
    # Highest handshake revision to negotiate; None means the latest (2025-11-25).
    "PROTOCOL_VERSION": None,
    # Check tool call arguments against the input schema, and structured results against the
    # output schema.
    "VALIDATE_TOOL_CALL_ARGUMENTS": True,
    "VALIDATE_TOOL_CALL_RESULTS": False,
    # Dotted paths of hooks: exception_reporter(exc, context), around_request(data, call_next),
    # instrumentation_callback(data).
    "EXCEPTION_REPORTER": None,
    "AROUND_REQUEST": None,
    "INSTRUMENTATION_CALLBACK": None,
    # Pass the server_context dict to the two hooks above.
    "INSTRUMENT_SERVER_CONTEXT": False,
    # MCP middleware (docs/middleware.md): import strings of factories taking the next handler,
    # applied in order around every request and notification, in both eras and on Celery workers.
    "MIDDLEWARE": [],
    # mcp_server.middleware.RateLimitMiddleware: token buckets shared by every process, each rate
    # "number/period" as DRF writes throttle rates ("5/minute"; s, m, h, d); the keys of
    # RATE_LIMITS_DEFAULTS below. Past one, -32029 with data.retryAfter (HTTP 429 and Retry-After).
    "RATE_LIMITS": {},
    # Where the buckets live, shared by every process: "auto" (Redis at REDIS_URL, else Django's
    # cache), "redis" (atomic, a Lua script) or "cache" (Django's cache RATE_LIMIT_CACHE; atomic
    # only where its add() is: Redis, Memcached, database; LocMem is one process's).
    "RATE_LIMIT_STORE": "auto",
    "RATE_LIMIT_CACHE": "default",
    # mcp_server.middleware.TimeoutMiddleware: seconds a tool call may run (None: no bound), and
    # per tool name (a number, or None for no bound); past it the handler is cancelled and the call
    # ends with -32001.
    "TOOL_TIMEOUT": None,
    "TOOL_TIMEOUTS": {},
    # Dotted path of the class the default server is built from.
    "SERVER_CLASS": "mcp_server.server.Server",
    # Import each installed app's mcp.py at start-up, as admin does with admin.py.
    "AUTODISCOVER": True,
    # Seconds a request to the client (sampling, elicitation, roots, ping) waits for its answer,
    # unless the call passes its own timeout.
    "SERVER_TO_CLIENT_REQUEST_TIMEOUT": 600,
    # The default server's registry as administrators shape it in admin (switches, overrides,
    # restrictions, prompts and resources defined there), read from the database.
    "REGISTRY_IN_DATABASE": True,
    # Skills (SEP-2640), served when CAPABILITIES declares io.modelcontextprotocol/skills: folders
    # searched after each installed app's skills/ folder.
    "SKILLS_DIRS": [],
    # Files one skill may have, SKILL.md included (a skill with more is refused, not cut).
    "SKILLS_MAX_FILES": 512,
    # Bytes one skill's files may take together (16 MiB; a bigger skill is refused, not cut).
    "SKILLS_MAX_BYTES": 16 * 1024 * 1024,
    # Seconds between two list_changed notifications of one list that changes made in admin or the
    # API send from one process: the changes within it are announced once, when it ends (0: each
    # change at once). Thirty saves in a loop are then two notifications for every session.
    "LIST_CHANGED_MIN_INTERVAL": 1,
    # The tool search (mcp_server.registry.search_tool): None (off), or a dict over
    # {"THRESHOLD": 50, "MAX_RESULTS": 10}: the default server offers a search_tools tool to a
    # principal who sees more than THRESHOLD tools, answering with at most MAX_RESULTS of them.
    "TOOL_SEARCH": None,
    # Where tools marked background=True run: "auto" (Celery workers when the project sets
    # CELERY_BROKER_URL, else the web process), "celery" or "local".
    "BACKGROUND_CALLS": "auto",
    # Times a background call of an idempotent tool (annotated idempotent_hint=True) runs again
    # when its worker dies mid-call (0: never; other tools never run twice).
    "BACKGROUND_RETRIES": 1,
    # Fair share of background calls: calls one principal (the Django user, else the token's client
    # and subject, else the client address) may have queued or running at once, tasks included,
    # counted over every process (None: no limit). One more is refused: over HTTP with 429 and
    # Retry-After before anything runs, elsewhere with a JSON-RPC error (-32600).
    "MAX_BACKGROUND_CALLS_PER_PRINCIPAL": 10,
    # Bytes a background call's stored record may take: its arguments (those the tool's input
    # schema declares; others are dropped) and the request's other params, as compact JSON. A
    # larger call is refused with -32602 before anything is stored.
    "MAX_BACKGROUND_CALL_BYTES": 1024 * 1024,
    # Seconds a finished background call that is not a task stays in the database (admin, the
    # API); then the cleanup (manage.py mcp_clean_tasks, the Celery beat entry) deletes it. None:
    # kept forever. Tasks follow TASK_TTL_MS instead.
    "BACKGROUND_CALL_RETENTION": 24 * 3600,
    # Seconds one run of a background call may take (None: no bound). Past it the call is
    # cancelled as by a client's cancel (the tool stops at its next cancelled() check) and ends
    # with a JSON-RPC error (-32603); a tool that never checks runs on until it returns, and its
    # result is kept. Celery's own time limits (CELERY_TASK_TIME_LIMIT) bound those, by killing
    # the worker process.
    "BACKGROUND_CALL_TIME_LIMIT": None,
    # The Tasks extension (SEP-2663): milliseconds a task stays readable after it was created
    # (its ttlMs; later, tasks/get answers "expired" and cleanup deletes it; None: forever), and
    # the pollIntervalMs the server suggests to clients that poll tasks/get.
    "TASK_TTL_MS": 3_600_000,
    "TASK_POLL_INTERVAL_MS": 1000,
    # The path mcp_server.asgi.get_asgi_application() (and mcp_urlpatterns()) serves the default
    # server at: "/" then at least one character, no query.
    "ENDPOINT_PATH": "/mcp",
    # Whether get_asgi_application() serves STATIC_URL itself (with WhiteNoise: STATIC_ROOT after
    # collectstatic, and the apps' own files too when DEBUG or WHITENOISE_USE_FINDERS). None: when
    # django.contrib.staticfiles is installed, STATIC_URL is a path of this site, and DEBUG is on
    # or STATIC_ROOT is set. False leaves static files to a web server in front (nginx).
    "SERVE_STATIC": None,
    # Streamable HTTP (the /mcp endpoint), with the option names of StreamableHTTPTransport.
    # No session ids and no server-to-client messages; every POST stands alone.
    "STATELESS": False,
    # Answer every POST with one JSON object instead of an SSE stream.
    "ENABLE_JSON_RESPONSE": False,
    # Hosts and Origins accepted besides loopback; None means Django's ALLOWED_HOSTS.
    "ALLOWED_HOSTS": None,
    "ALLOWED_ORIGINS": [],
    # Check Host and Origin (403 otherwise) against the two lists above.
    "DNS_REBINDING_PROTECTION": True,
    # Seconds of inactivity after which a session expires (None: never).
    "SESSION_IDLE_TIMEOUT": 1800,
    # Open sessions at most (None: unlimited); a new one past it gets HTTP 503.
    "MAX_SESSIONS": 10_000,
    # Dotted path of validator(request, session_id) -> bool, run on every request of a session.
    "SESSION_REQUEST_VALIDATOR": None,
    # Largest request body (413 past it), and deepest nesting of objects and arrays in it (400).
    "MAX_REQUEST_BYTES": 4 * 1024 * 1024,
    "MAX_JSON_DEPTH": 64,
    # Objects and arrays in one request body at most (400, -32700 past it): a body of a million
    # tiny containers would hold the event loop while it is decoded.
    "MAX_JSON_CONTAINERS": 100_000,
    # Seconds between keepalive comments on listening streams.
    "KEEPALIVE_INTERVAL": 30,
    # Seconds stored SSE events are kept for clients that resume a stream.
    "EVENT_RETENTION": 3600,
    # Seconds between each process's heartbeats in the shared state. A process that misses them
    # for 3 intervals is dead: its requests get an error and its streams can be reopened.
    "PROCESS_HEARTBEAT_INTERVAL": 5,
    # Seconds a web process told to stop (SIGTERM) lets its requests in flight finish before it
    # ends them as its death would (docs/production.md, "Rolling restarts"). Its listening streams
    # end at once, with an SSE retry hint: their clients resume on another process.
    "DRAIN_TIMEOUT": 30,
    # The path of the health check a load balancer polls, served by mcp_server.asgi's application
    # in every process: 200 while it serves, 503 once it drains (None: no health check).
    "HEALTH_CHECK_PATH": "/healthz",
    # Once mcp_server.asgi's application is built, what start-up loaded (modules, settings, the
    # registry) is set outside the cyclic garbage collector's reach (gc.freeze), so that its full
    # collections walk only what requests made, not the whole process (docs/performance.md, "The
    # tail at concurrency 1"). False leaves the collector as Python sets it.
    "FREEZE_STARTUP_OBJECTS": True,

    # Fair share: what one client may hold at once (None: no limit). Past a limit the client gets
    # HTTP 429 with Retry-After (docs/production.md, "Limits").
    # Sessions open at once per principal: the Django user, or the client address when anonymous.
    "MAX_SESSIONS_PER_PRINCIPAL": 100,
    # Listening streams open at once per session (its GET stream plus resumed POST streams).
    "MAX_STREAMS_PER_SESSION": 10,
    # Resources one session may be subscribed to; one more gets a JSON-RPC error.
    "MAX_SUBSCRIPTIONS_PER_SESSION": 1000,
    # Stored SSE events per session, in number and in bytes: past either, the oldest are dropped,
    # and a resume from before what was kept gets HTTP 410.
    "MAX_STORED_EVENTS_PER_SESSION": 1000,
    "MAX_STORED_EVENT_BYTES_PER_SESSION": 16 * 1024 * 1024,
    # Bytes an SSE response may have waiting for a client that stopped reading before it is cut
    # off (under daphne; the client resumes with Last-Event-ID).
    "MAX_SSE_BUFFER_BYTES": 4 * 1024 * 1024,
    # Seconds a write waits for a client that reads nothing (its buffer full) before the client is
    # cut off; it resumes with Last-Event-ID.
    "SSE_STALL_TIMEOUT": 10,
    # Events waiting to be written on one listening stream; past it the stream ends (and the
    # client resumes from the store) rather than skip events.
    "MAX_QUEUED_STREAM_EVENTS": 1000,
    # The longest _meta.progressToken accepted (each progress notification carries and stores it).
    "MAX_PROGRESS_TOKEN_LENGTH": 256,
    # 2026-07-28 subscriptions/listen streams one process serves at once (None: unlimited); one
    # more gets HTTP 503. Seconds between keepalive comments on them (None: none).
    "MAX_LISTEN_SUBSCRIPTIONS": 1000,
    "LISTEN_KEEPALIVE_INTERVAL": 15,
    # subscriptions/listen streams one principal (as MAX_SESSIONS_PER_PRINCIPAL counts them) may
    # have open at once, over every process (None: unlimited); one more gets HTTP 429.
    "MAX_LISTEN_SUBSCRIPTIONS_PER_PRINCIPAL": 10,
    # Seconds between checks of the credential a GET or listen stream was opened with (a bearer
    # token, through AUTHENTICATION_CLASSES): once it is refused (revoked), the stream ends, and so
    # it does at the credential's expiry. None: no checks; streams end at their token's expiry.
    "STREAM_CREDENTIAL_CHECK_INTERVAL": 60,
    # Redis for the state every process must share (which process holds which stream); None
    # keeps it in process memory, right for one process only. A primary that Redis Sentinel
    # manages: redis+sentinel://sentinel-1:26379,sentinel-2:26379/mymaster/0 (the sentinels, the
    # service name they monitor, the database), asked again after a failover (docs/production.md).
    "REDIS_URL": None,
    # Seconds a Redis command may take; past it the request gets 503 and the connection is
    # replaced (reconnecting with backoff), so a Redis that stops answering stalls nothing.
    "REDIS_COMMAND_TIMEOUT": 5,
    # A dict: the stores talk to Redis through redis-py, Redis.from_url(REDIS_URL, **REDIS_OPTIONS)
    # (TLS certificates, say), instead of the faster built-in client.
    "REDIS_OPTIONS": None,
    # Dotted path of factory(REDIS_URL) -> redis.asyncio.Redis (any client redis-py can make);
    # also redis-py.
    "REDIS_CLIENT_FACTORY": None,
    # Dotted paths of the shared state and event store classes; None: Redis ones with REDIS_URL,
    # else process memory, and the events in memory too where one process serves every session
    # (an in-memory channel layer, background calls in the web process), else as database rows.
    # See site.build_stores for how they are called.
    "SHARED_STATE_CLASS": None,
    "EVENT_STORE_CLASS": None,
    # stdio: the longest accepted line; a longer one closes the connection.
    "STDIO_MAX_LINE_BYTES": 4 * 1024 * 1024,
    # input_required (SEP-2322): keys sealing the requestState on the 2026-07-28 wire, each base64
    # of 32 random bytes, the same list on every process. The first seals, all open (rotation).
    # Empty: a handler returning a request_state to a modern client is an error, never plaintext.
    "REQUEST_STATE_KEYS": [],
    # Seconds a sealed requestState stays valid, and the audience it is bound to (None: none).
    "REQUEST_STATE_TTL": 300,
    "REQUEST_STATE_AUDIENCE": None,
    # Authentication of the endpoint (mcp_server.auth): dotted paths of the classes tried in order
    # (ours, or DRF authentication classes as they are). The default reads the Django session
    # cookie only, at no cost to a request without one.
    "AUTHENTICATION_CLASSES": ["mcp_server.auth.SessionAuthentication"],
    # Refuse a request with no credential (401 and a Bearer challenge); False serves it anonymously.
    "AUTHENTICATION_REQUIRED": False,
    # The endpoint as an OAuth 2.1 resource server; every key is in RESOURCE_SERVER_DEFAULTS.
    "RESOURCE_SERVER": {},
    # The optional OAuth 2.1 authorization server app (mcp_server.authorization_server): a dict of
    # the keys of AUTHORIZATION_SERVER_DEFAULTS below; the keys it leaves out keep their defaults.
    "AUTHORIZATION_SERVER": {},
    # Seconds a background call may wait in the Celery queue for a worker to take it (None:
    # forever). Past it the call fails with an error that says no worker took it and names the
    # broker: a JSON-RPC error (-32603) for its client, a failed task over the Tasks extension,
    # and the record in the database says so. Raise it when calls often wait for busy workers.
    "BACKGROUND_CALL_QUEUE_TIMEOUT": 60,
    # OpenTelemetry (the "telemetry" extra): "native" makes a span per message and the metrics of
    # the MCP semantic conventions, through whatever tracer and meter providers the process set up
    # (opentelemetry-instrument, or the project's own code); "propagation_only" makes none and
    # carries the caller's trace context into background calls and to the client; "off" imports
    # nothing. Without opentelemetry-api installed, "native" and "propagation_only" do nothing.
    "TELEMETRY": "native",
    # The audit trail: a row per tools/call, prompts/get and resources/read (mcp_server.AuditRecord),
    # written in batches after the response. False writes none.
    "AUDIT": True,
    # Days an audit row is kept; then manage.py mcp_clean_audit (and its Celery beat entry) deletes
    # it. None: kept forever.
    "AUDIT_RETENTION_DAYS": 365,
    # The writer's batches: rows are written when AUDIT_BATCH_SIZE of them wait, or
    # AUDIT_FLUSH_INTERVAL seconds after they were queued, and when the process stops cleanly.
    "AUDIT_BATCH_SIZE": 100,
    "AUDIT_FLUSH_INTERVAL": 1.0,
    # What the audit trail and span attributes keep of a call's arguments and results. Values under
    # a key containing one of REDACTED_KEYS (case-insensitive, at any depth) are replaced;
    # REDACTION_POLICY, a dotted path of policy(name, value) -> value, replaces the whole policy.
    "REDACTED_KEYS": ["password", "passwd", "secret", "token", "api_key", "apikey", "authorization",
                      "cookie", "credential", "private_key", "ssn", "card_number"],
    "REDACTION_POLICY": None,
    # The read-only model query tool (mcp_server.expose.model_query_tool, docs/django_tools.md).
    # Rows and bytes (of the rows as JSON) one call returns at most; past either the result is cut
    # and says so ("truncated": true).
    "QUERY_MAX_ROWS": 100,
    "QUERY_MAX_BYTES": 256 * 1024,
    # Rows and bytes one session may read in all (None: no limit); past either its calls are
    # refused. Counted in Django's cache QUERY_BUDGET_CACHE, which every process must share (Redis,
    # Memcached, the database cache; LocMem is one process's), for SESSION_IDLE_TIMEOUT seconds
    # after the session's last query; a request with no session (2026-07-28, stateless) counts
    # against its user.
    "QUERY_SESSION_MAX_ROWS": 10_000,
    "QUERY_SESSION_MAX_BYTES": 16 * 1024 * 1024,
    "QUERY_BUDGET_CACHE": "default",
    # Seconds one query may run before the database stops it (PostgreSQL's statement_timeout, set
    # for the query's transaction alone); the call then gets a tool error. PostgreSQL only: with
    # another backend, a value is an error (system check mcp_server.E111). None: no bound.
    "QUERY_STATEMENT_TIMEOUT": None,
    # The database alias the query tool reads from (a replica, say); None: the router's
    # db_for_read of each model.
    "QUERY_DATABASE": None,
}

# MCP_SERVER["RESOURCE_SERVER"]: a project sets only the keys it changes; an unknown key is an error.
RESOURCE_SERVER_DEFAULTS: dict[str, Any] = {
    # The endpoint's canonical URI, the audience its tokens must name ("https://mcp.example.com/mcp").
    # None: built from each request's scheme, Host and path (JWT and introspection then need AUDIENCE).
    "RESOURCE": None,
    # Issuer URLs of the authorization servers, for the Protected Resource Metadata (RFC 9728).
    "AUTHORIZATION_SERVERS": [],
    # Scopes the metadata advertises; the 401 challenge asks for REQUIRED_SCOPES, else these.
    "SCOPES_SUPPORTED": [],
    # Scopes every request needs (403 insufficient_scope without them).
    "REQUIRED_SCOPES": [],
    # Human-readable name in the metadata (resource_name); None leaves it out.
    "RESOURCE_NAME": None,
    # Dotted path of resolve(sub, claims) -> Django user or None, for bearer tokens; a plain def
    # runs on a worker thread (ORM queries work). None: tokens carry no user.
    "USER_RESOLVER": None,
    # JWTAuthentication: access tokens as JWTs verified against the issuer's JWKS.
    "JWT": {
        "JWKS_URL": None,            # the authorization server's JWKS
        "ISSUER": None,              # required "iss"; None: not checked
        "AUDIENCE": None,            # required "aud"; None: RESOURCE
        "ALGORITHMS": ["RS256", "ES256"],  # asymmetric only: HS* and none are refused
        "LEEWAY": 30,                # seconds of clock skew allowed on exp, nbf, iat
        "JWKS_CACHE_SECONDS": 3600,  # how long a fetched JWKS is used before it is fetched again
        "JWKS_REFETCH_INTERVAL": 60,  # an unknown kid refetches at most once per this many seconds
        "TIMEOUT": 5,                # seconds a JWKS fetch may take
    },
    # IntrospectionAuthentication: opaque tokens checked with RFC 7662 token introspection.
    "INTROSPECTION": {
        "ENDPOINT": None,            # the RFC 7662 introspection endpoint
        "CLIENT_ID": None,           # HTTP Basic credentials of this resource server
        "CLIENT_SECRET": None,       # (both or neither)
        "AUDIENCE": None,            # required in the answer's "aud"; None: RESOURCE
        "CACHE_SECONDS": 60,         # an active answer is reused this long at most, never past exp
        "CACHE_SIZE": 10_000,        # answers kept per process at most
        "TIMEOUT": 5,                # seconds an introspection request may take
    },
}

AUTHORIZATION_SERVER_DEFAULTS: dict[str, Any] = {
    # The issuer identifier (RFC 8414), e.g. "https://auth.example.com"; None: the origin of each
    # request (scheme and host), right behind no proxy or one Django trusts (SECURE_PROXY_SSL_HEADER).
    "ISSUER": None,
    # Scopes clients may ask for, name -> what the consent page says; and those granted when a
    # request names none.
    "SCOPES": {"mcp": "Use this server's tools, prompts and resources"},
    "DEFAULT_SCOPES": ["mcp"],
    # The canonical URI of this site's MCP endpoint (RFC 8707 resource, the tokens' audience), as
    # LocalTokenAuthentication checks it; None: the URL each request came to (scheme, host, path).
    "RESOURCE": None,
    # Seconds an access token, a refresh token and an authorization code are valid.
    "ACCESS_TOKEN_LIFETIME": 3600,
    "REFRESH_TOKEN_LIFETIME": 30 * 24 * 3600,
    "AUTHORIZATION_CODE_LIFETIME": 60,
    # Dynamic Client Registration (RFC 7591, RFC 7592), open to anyone (as MCP clients need).
    "DYNAMIC_CLIENT_REGISTRATION": True,
    # Client ID Metadata Documents: an https client_id is fetched, validated and kept this many
    # seconds at most (less when its Cache-Control says so, never less than a minute).
    "CLIENT_ID_METADATA_DOCUMENTS": True,
    "CIMD_CACHE_TIMEOUT": 3600,
    # The fetch: seconds the whole of it may take (DNS lookup, connection, every byte of the body),
    # bytes the document may have. A failed fetch backs off its host for the toolkit's
    # CIMD_FAILURE_BACKOFF_SECONDS (OAUTH2_PROVIDER, 60), whatever URL of it a client names.
    "CIMD_FETCH_TIMEOUT": 5,
    "CIMD_MAX_DOCUMENT_BYTES": 5 * 1024,
    # Let a document's host resolve to a loopback address: for tests and development only (the
    # fetch otherwise refuses private, loopback, link-local, multicast and reserved addresses).
    "CIMD_ALLOW_LOOPBACK": False,
    # A file of CA certificates the fetch verifies documents' servers with; None: the system's.
    "CIMD_CA_BUNDLE": None,
    # Seconds after which a dynamically registered client that holds no token (it never got one,
    # or they are all gone) counts as abandoned (manage.py mcp_prune_oauth_clients).
    "ABANDONED_CLIENT_AGE": 7 * 24 * 3600,
    # Where the consent page sends a visitor who is not logged in; None: the app's own login page
    # (oauth/login/, wrong passwords counted per LOGIN_FAILURE_RATE).
    "LOGIN_URL": None,
    # Let dynamically registered clients use client_credentials, whose tokens have no user behind
    # them: with open registration, anyone could then get a token of their own. False: such a
    # registration is refused (400 invalid_client_metadata), and so is the grant (400
    # unauthorized_client) for a client registered while it was allowed. Clients an administrator
    # creates are not concerned.
    "DYNAMIC_CLIENT_CREDENTIALS": False,
    # Limits, each "number/period" as DRF's throttle rates are written ("20/hour"; s, m, h, d),
    # counted in fixed periods in Django's cache, which every process must share (Redis) for the
    # limit to hold across them; None lifts one. Past a limit the request gets 429 and Retry-After.
    # Registrations (POST /oauth/register/) from one client address.
    "REGISTRATION_RATE": "20/hour",
    # Wrong passwords on the login page (this app's LoginView) per account and client address;
    # past it even the right password is refused until the period ends.
    "LOGIN_FAILURE_RATE": "10/hour",
    # Failed client authentications (a wrong client secret) at the token and revocation endpoints
    # per client id and client address; past it even the right secret is refused.
    "CLIENT_SECRET_FAILURE_RATE": "10/hour",
    # What one registration may hold (RFC 7591 and 7592 requests; metadata documents too): redirect
    # URIs, in number and in characters each (400 invalid_redirect_uri past either), and the bytes
    # of the request body (400 invalid_client_metadata past it, before it is decoded).
    "MAX_REDIRECT_URIS": 10,
    "MAX_REDIRECT_URI_LENGTH": 2000,
    "MAX_REGISTRATION_BYTES": 64 * 1024,
}

# MCP_SERVER["RATE_LIMITS"]: the keys a project may set.
RATE_LIMITS_DEFAULTS: dict[str, Any] = {
    # Every request of one principal (initialize, ping and server/discover aside), as "5/minute".
    "PRINCIPAL": None,
    # Tool name ("*": each tool not named) -> the rate of its calls by one principal (None: none).
    "TOOLS": {},
    # Tool name ("*": each tool not named) -> the rate of its calls by every principal of one OAuth
    # client together (requests whose credential names no client are not counted).
    "CLIENT_TOOLS": {},
}

_DOTTED = ("EXCEPTION_REPORTER", "AROUND_REQUEST", "INSTRUMENTATION_CALLBACK", "SERVER_CLASS",
           "SESSION_REQUEST_VALIDATOR", "REDIS_CLIENT_FACTORY", "SHARED_STATE_CLASS",
           "EVENT_STORE_CLASS", "REDACTION_POLICY")


# Settings that are dicts of their own keys, each with its defaults.
_NESTED: dict[str, dict[str, Any]] = {"RESOURCE_SERVER": RESOURCE_SERVER_DEFAULTS,
                                      "AUTHORIZATION_SERVER": AUTHORIZATION_SERVER_DEFAULTS,
                                      "RATE_LIMITS": RATE_LIMITS_DEFAULTS}
# Dicts among those whose keys are the project's own (names it chooses), taken as they are.
_FREE_FORM = {"AUTHORIZATION_SERVER.SCOPES", "RATE_LIMITS.TOOLS", "RATE_LIMITS.CLIENT_TOOLS"}


def _merged(path: str, value: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """``value`` over ``defaults``, a level of nested dicts at a time; an unknown key is an error."""
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"MCP_SERVER[{path!r}] must be a dict, not {type(value).__name__}")
    unknown = set(value) - set(defaults)
    if unknown:
        raise ImproperlyConfigured(f"unknown MCP_SERVER[{path!r}] settings: {', '.join(sorted(unknown))}; "
                                   f"the known ones are {', '.join(defaults)}")
    merged = dict(defaults)
    for key, item in value.items():
        nested = isinstance(defaults[key], dict) and f"{path}.{key}" not in _FREE_FORM
        merged[key] = _merged(f"{path}.{key}", item, defaults[key]) if nested else item
    return merged


class MCPSettings:
    """Attribute access to ``settings.MCP_SERVER`` over :data:`DEFAULTS`."""

    @property
    def _cache(self) -> dict[str, Any]:
        # The values read are attributes of the instance: read again (several per request), they
        # are found at once, without a failed lookup and a call of __getattr__.
        return self.__dict__

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"MCP_SERVER has no setting {name!r}")
        if name not in self._cache:
            value = self._user().get(name, DEFAULTS[name])
            if name in _NESTED:
                value = _merged(name, value, _NESTED[name])
            elif name in _DOTTED and isinstance(value, str):
                try:
                    value = import_string(value)
                except ImportError as exc:
                    raise ImproperlyConfigured(
                        f"MCP_SERVER[{name!r}] = {value!r} cannot be imported: {exc}"
                    ) from exc
            self._cache[name] = value
        return self._cache[name]

    def is_set(self, name: str) -> bool:
        """Whether the project's ``MCP_SERVER`` gives ``name`` a value (rather than the default)."""
        return name in self._user()

    @staticmethod
    def _user() -> dict[str, Any]:
        # ImproperlyConfigured, not AttributeError: a typo must stop start-up with a clear message,
        # and an AttributeError from __getattr__ would read as a missing attribute to getattr().
        user = getattr(settings, "MCP_SERVER", None) or {}
        if not isinstance(user, dict):
            raise ImproperlyConfigured(f"MCP_SERVER must be a dict, not {type(user).__name__}")
        unknown = set(user) - set(DEFAULTS)
        if unknown:
            raise ImproperlyConfigured(
                f"unknown MCP_SERVER settings: {', '.join(sorted(unknown))}; "
                f"the known ones are {', '.join(DEFAULTS)}"
            )
        return user

    def reload(self) -> None:
        self._cache.clear()



mcp_settings = MCPSettings()


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_SERVER":
        mcp_settings.reload()


setting_changed.connect(_on_setting_changed)
