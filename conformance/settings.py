"""Settings of the conformance server: the ``conformance.fixtures`` app on our MCP server.

With no configuration it runs on the embedded default: SQLite in ``conformance/var/`` (or the file
``CONFORMANCE_SQLITE`` names) and the in-memory channel layer, right for one process.
``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` (channel layer, cache, shared state) let several
processes serve the same sessions, which ``conformance/run --two-processes`` does.
"""

import os
from pathlib import Path

import dj_database_url

HERE = Path(__file__).resolve().parent
VAR = HERE / "var"

SECRET_KEY = "conformance-only-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "channels",
    "mcp_server",
    "conformance.fixtures",
]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "conformance.urls"
ASGI_APPLICATION = "conformance.asgi.application"

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{os.environ.get('CONFORMANCE_SQLITE') or VAR / 'db.sqlite3'}",
        conn_max_age=0,  # as the demo project: no connection kept per thread under ASGI
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Tool calls run on worker threads next to the event loop, beside the audit writer: as the
    # demo project, WAL, and the write lock taken when a transaction starts, so that writers
    # queue on the busy timeout instead of one failing with "database is locked" when a read
    # transaction upgrades to a write (a subscribe's get_or_create did, under load).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # As the demo project: a SQLite connection is kept (opening one reads the whole schema).
    DATABASES["default"]["CONN_MAX_AGE"] = None
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py defaults socket_timeout to 5 s, which breaks idle channel receives.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}], "capacity": 10_000},
        }
    }
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

USE_TZ = True
TIME_ZONE = "UTC"

MCP_SERVER = {
    "NAME": "django-mcp-conformance",
    "VERSION": "1.0.0",
    "REDIS_URL": REDIS_URL,
    "CAPABILITIES": {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
        "logging": {},
        "completions": {},
        # The Tasks extension: background tools answer as tasks to clients that declare it.
        "extensions": {"io.modelcontextprotocol/tasks": {},
                       # Skills (SEP-2640): the demo project's, found through SKILLS_DIRS.
                       "io.modelcontextprotocol/skills": {"directoryRead": True}},
    },
    "SKILLS_DIRS": [HERE.parent / "project" / "demo" / "skills"],
    # The suite runs scenarios one after another, each with a new session.
    "MAX_SESSIONS": None,
    "MAX_SESSIONS_PER_PRINCIPAL": None,  # every scenario connects from 127.0.0.1
    # Likewise their tasks (a scenario may leave one waiting for input) and listen streams.
    "MAX_BACKGROUND_CALLS_PER_PRINCIPAL": None,
    "MAX_LISTEN_SUBSCRIPTIONS_PER_PRINCIPAL": None,
    "SERVER_TO_CLIENT_REQUEST_TIMEOUT": 60,
    # Seals input_required request states; every process of the two-process run shares it. A
    # fixed key is right for the conformance run only: a deployment keeps its keys secret.
    "REQUEST_STATE_KEYS": ["Y29uZm9ybWFuY2Utb25seS1ub3QtYS1zZWNyZXQtISE"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
