"""Settings of the demo project.

It needs ``DJANGO_SECRET_KEY``, or ``DJANGO_DEVELOPMENT=1`` on a development machine (see below).
With no other configuration it runs on the embedded default: SQLite and the in-memory channel layer.
``DATABASE_URL`` switches to PostgreSQL, ``REDIS_URL`` to the Redis channel layer and cache;
``CELERY_BROKER_URL`` runs background tools on Celery workers (``celery -A project worker``);
``MCP_STATELESS=1`` and ``MCP_JSON_RESPONSE=1`` switch the transport's modes (see the bottom);
on PostgreSQL each process has a pool of at most ``MCP_DATABASE_POOL`` connections (10 unless
set; ``MCP_DATABASE_POOL=0``: none, a connection per request);
``MCP_PROTECTED=1`` makes the endpoint require a token of the demo's own authorization server, with
``MCP_PUBLIC_URL`` the origin clients reach the demo at (default ``http://127.0.0.1:8000``).
"""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from mcp_server.redis_sentinel import cache_backend, celery_broker, channel_layer_host

BASE_DIR = Path(__file__).resolve().parent.parent

# Safe by default: DEBUG only when asked for, and a real secret key outside development.
# Development is DJANGO_DEBUG=1, or DJANGO_DEVELOPMENT=1 (set by scripts/demo and the test suite):
# there, without DJANGO_SECRET_KEY, a fixed key that Django's deploy checks flag as insecure is used.
DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
DEVELOPMENT = DEBUG or os.environ.get("DJANGO_DEVELOPMENT") == "1"
INSECURE_DEVELOPMENT_KEY = "django-insecure-development-only-key-never-use-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or (INSECURE_DEVELOPMENT_KEY if DEVELOPMENT else "")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set. Set it to a long random value, for example the output of "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))'; on a development machine, "
        "DJANGO_DEVELOPMENT=1 (or DJANGO_DEBUG=1) uses an insecure development key instead."
    )
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "mcp_server",
    # The OAuth 2.1 authorization server for MCP clients (docs/authorization_server.md).
    "oauth2_provider",
    "mcp_server.authorization_server",
    "project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"
WSGI_APPLICATION = "project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The connections of a process's pool on PostgreSQL (MCP_DATABASE_POOL, below).
DEFAULT_DATABASE_POOL = 10
DATABASES = {
    "default": dj_database_url.config(
        # No persistent connections (Django's advice under ASGI): sync code runs on threads that
        # come and go, and a connection kept per thread would stay open, idle, until the server
        # refused every process. Each is closed once its request or worker-thread call ends, so a
        # process holds only the connections in use (docs/production.md, "Deploying"). With the
        # pool (below, the default on PostgreSQL) "closed" gives it back to the pool: Django
        # requires CONN_MAX_AGE 0 there.
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=0,
        # A connection that the server ended (a restart, a failover, pg_terminate_backend) is
        # found dead and replaced before a request uses it, instead of failing that request.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    options = DATABASES["default"].setdefault("OPTIONS", {})
    # A server that cannot be reached (a failover in progress, a host gone) fails the request in
    # seconds (503) instead of waiting for TCP to give up; DATABASE_URL's ?connect_timeout= wins.
    options.setdefault("connect_timeout", 5)
    # Django's connection pool (psycopg_pool: the `postgres` extra installs it), at most
    # MCP_DATABASE_POOL connections per process (10 unless set; 0 turns the pool off), kept open
    # and checked before each use (so one that a restart killed is replaced). Without it each
    # request that touches the database opens a connection and closes it (about 1.6 M
    # instructions each, two per session). A request waits at most 5 s for one, then gets 503:
    # while the server is down, requests fail in that time rather than at the pool's default 30 s.
    # A Celery worker's children each open their own (docs/production.md, "PostgreSQL").
    size = os.environ.get("MCP_DATABASE_POOL") or str(DEFAULT_DATABASE_POOL)
    if not size.isdigit():
        raise ImproperlyConfigured(f"MCP_DATABASE_POOL is a number of connections (0 for no pool), "
                                   f"not {size!r}")
    if int(size) > 0:
        options["pool"] = {"min_size": min(2, int(size)), "max_size": int(size), "timeout": 5}
elif os.environ.get("MCP_DATABASE_POOL", "0") != "0":
    raise ImproperlyConfigured("MCP_DATABASE_POOL needs PostgreSQL (DATABASE_URL=postgres://...)")
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory, so test servers in other processes see the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "test_db.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        # Write-ahead logging: readers do not wait for the writer, and a commit appends to the
        # log instead of rewriting a journal file (each SSE event is a commit: several times less
        # CPU per event). NORMAL is durable across a crash of the process, which is what WAL needs.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        # Take the write lock when a transaction starts, so two writers queue on the busy
        # timeout instead of one failing with "database is locked" when it upgrades its lock.
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # Connections kept by the threads that use them: a SQLite connection is a file handle, not a
    # slot of a server, and opening one reads the whole schema (about half the CPU of a call whose
    # store writes a row). The reasons for 0 above are PostgreSQL's.
    DATABASES["default"]["CONN_MAX_AGE"] = None
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# A redis:// URL, or redis+sentinel://sentinel-1:26379,sentinel-2:26379/mymaster/0 for a primary
# that Redis Sentinel manages (the channel layer, the cache, the stores and a Celery broker of that
# form all ask the sentinels where it is: docs/production.md, "Redis Sentinel").
REDIS_URL = os.environ.get("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # A process channel carries every cancel, answer and delivery for that process.
            # The socket timeout must outlast the layer's 5 s blocking read (BZPOPMIN): redis-py 8
            # made it 5 s by default, and every idle receive then fails (channels_redis #422).
            "CONFIG": {"hosts": [channel_layer_host(REDIS_URL, socket_timeout=15)], "capacity": 10_000},
        }
    }
    CACHES = {"default": cache_backend(REDIS_URL)}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Celery (project/celery.py reads every CELERY_* setting). Without a broker, tools marked to run in
# the background run in the web process (MCP_SERVER["BACKGROUND_CALLS"]). A worker must reach the
# web processes: it needs REDIS_URL too. A broker is Redis (redis://...) or RabbitMQ (amqp://...).
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or None
if CELERY_BROKER_URL:
    # redis+sentinel://... becomes kombu's sentinel:// transport and its master_name. Celery reads
    # the CELERY_BROKER_URL environment variable before this setting: it gets the same URL.
    CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = celery_broker(CELERY_BROKER_URL)
    if "CELERY_BROKER_URL" in os.environ:
        os.environ["CELERY_BROKER_URL"] = CELERY_BROKER_URL
# Background calls are at most once: a task is acknowledged when a worker takes it, and one that a
# worker lost is not run again (docs/background.md).
CELERY_TASK_ACKS_LATE = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# `celery -A project beat` deletes expired tasks (Tasks extension) every 10 minutes, and audit rows
# past AUDIT_RETENTION_DAYS every hour.
CELERY_BEAT_SCHEDULE = {"mcp-clean-tasks": {"task": "mcp_server.clean_tasks", "schedule": 600.0},
                        "mcp-clean-audit": {"task": "mcp_server.clean_audit", "schedule": 3600.0}}

# Django REST framework, for the API at /api/mcp/ (mcp_server.api). Basic comes first so that an
# anonymous request gets 401 with a challenge: DRF answers 403 when the first class has no challenge
# to send, as SessionAuthentication has none. The session serves a browser logged in to admin.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.BasicAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 100,
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# Where `manage.py collectstatic` gathers the static files (admin's styles and scripts): served by
# the ASGI application itself (mcp_server.asgi, with WhiteNoise) or by a web server in front
# (deploy/nginx.conf). DJANGO_STATIC_ROOT moves it.
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles"
# In development the apps' own files are served as they are, without collectstatic.
WHITENOISE_USE_FINDERS = DEVELOPMENT

MCP_SERVER = {
    "NAME": "django-mcp-demo",
    "TITLE": "Django MCP demo",
    "VERSION": "0.1.0",
    "INSTRUCTIONS": "A small demo server: echo, add, a greeting prompt and a few resources.",
    "REDIS_URL": REDIS_URL,
    "CAPABILITIES": {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
        "logging": {},
        "completions": {},
        # The Tasks extension: background tools (count_in_background) answer 2026-07-28 clients
        # that declare it with a task handle, and stream to the others.
        # Skills (SEP-2640): demo/skills/ and those defined in admin, with resources/directory/read.
        "extensions": {"io.modelcontextprotocol/tasks": {},
                       "io.modelcontextprotocol/skills": {"directoryRead": True}},
    },
}
# Keys sealing input_required request states, comma-separated; every web process must get the
# same ones (docs/protocol_revisions.md, "Multi round-trip requests").
if os.environ.get("MCP_REQUEST_STATE_KEYS"):
    MCP_SERVER["REQUEST_STATE_KEYS"] = os.environ["MCP_REQUEST_STATE_KEYS"].split(",")
# Environment switches of the transport (bench/run uses them): MCP_STATELESS=1 serves every POST
# on its own with no session, MCP_JSON_RESPONSE=1 answers requests with JSON instead of SSE.
if os.environ.get("MCP_STATELESS") == "1":
    MCP_SERVER["STATELESS"] = True
if os.environ.get("MCP_JSON_RESPONSE") == "1":
    MCP_SERVER["ENABLE_JSON_RESPONSE"] = True
# MCP_REGISTRY_IN_DATABASE=0 serves the registry as code defines it, without admin's changes
# (bench/run measures what reading them costs).
if os.environ.get("MCP_REGISTRY_IN_DATABASE") == "0":
    MCP_SERVER["REGISTRY_IN_DATABASE"] = False
# MCP_AUDIT=0 turns the audit trail off, MCP_AUDIT_FLUSH_INTERVAL sets its writer's interval
# (bench/instructions.py measures what it costs).
if os.environ.get("MCP_AUDIT") == "0":
    MCP_SERVER["AUDIT"] = False
if os.environ.get("MCP_AUDIT_FLUSH_INTERVAL"):
    MCP_SERVER["AUDIT_FLUSH_INTERVAL"] = float(os.environ["MCP_AUDIT_FLUSH_INTERVAL"])
# MCP_TELEMETRY=off|native|propagation_only sets MCP_SERVER["TELEMETRY"] (bench/instructions.py
# counts what each costs).
if os.environ.get("MCP_TELEMETRY"):
    MCP_SERVER["TELEMETRY"] = os.environ["MCP_TELEMETRY"]
# A load generator opens thousands of sessions from one address: MCP_MAX_SESSIONS_PER_PRINCIPAL=none
# lifts the per-principal limit (a number sets it).
if os.environ.get("MCP_MAX_SESSIONS_PER_PRINCIPAL"):
    value = os.environ["MCP_MAX_SESSIONS_PER_PRINCIPAL"]
    MCP_SERVER["MAX_SESSIONS_PER_PRINCIPAL"] = None if value.lower() == "none" else int(value)

# MCP_PROTECTED=1: the endpoint requires a token of the demo's own authorization server (mounted
# in project/urls.py), or the session cookie of a logged-in user. MCP_PUBLIC_URL is the
# origin clients reach the demo at: the issuer, and the endpoint's resource (RFC 8707), which the
# Protected Resource Metadata and the tokens' audience check must both name. A client reaching
# the demo at another origin (localhost for 127.0.0.1) gets tokens for the wrong audience.
PROTECTED = os.environ.get("MCP_PROTECTED") == "1"
if PROTECTED:
    PUBLIC_URL = (os.environ.get("MCP_PUBLIC_URL") or "http://127.0.0.1:8000").rstrip("/")
    RESOURCE = f"{PUBLIC_URL}/mcp"
    MCP_SERVER["AUTHENTICATION_CLASSES"] = [
        "mcp_server.authorization_server.authentication.LocalTokenAuthentication",
        "mcp_server.auth.SessionAuthentication",
    ]
    MCP_SERVER["AUTHENTICATION_REQUIRED"] = True
    MCP_SERVER["RESOURCE_SERVER"] = {
        "RESOURCE": RESOURCE, "AUTHORIZATION_SERVERS": [PUBLIC_URL], "SCOPES_SUPPORTED": ["mcp"],
        "RESOURCE_NAME": "Django MCP demo",
    }
    MCP_SERVER["AUTHORIZATION_SERVER"] = {"ISSUER": PUBLIC_URL, "RESOURCE": RESOURCE}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
    "root": {"handlers": ["stderr"], "level": "INFO"},
}
