"""Redis Sentinel in one URL, for every Redis user of a deployment.

    redis+sentinel://[[user]:password@]host:port[,host:port...]/service_name[/db][?options]

The hosts are the sentinels (26379 when a port is left out), ``service_name`` the name the
sentinels monitor the primary under (``sentinel monitor <name> ...``), ``db`` the database number
(0 when left out). The user and password are those of the primary and its replicas; the query
may add ``sentinel_username`` and ``sentinel_password`` for sentinels that want credentials of
their own. The form is the one of the ``redis-sentinel-url`` package.

``MCP_SERVER["REDIS_URL"]`` takes such a URL as it is (the stores ask the sentinels where the
primary is, and ask again after a failover). The other users take it through the helpers here:
:func:`channel_layer_host` (channels_redis), :func:`cache_backend` (Django's ``RedisCache``),
:func:`celery_broker` (kombu's ``sentinel://`` transport). A leaf: it imports redis-py only when
a pool is made, and nothing of Django, so a settings module may import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

SCHEME = "redis+sentinel"
DEFAULT_SENTINEL_PORT = 26379
_QUERY_KEYS = ("sentinel_username", "sentinel_password")


@dataclass(frozen=True)
class SentinelURL:
    """What a ``redis+sentinel://`` URL says."""

    sentinels: list[tuple[str, int]]
    service_name: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None

    def data_credentials(self) -> dict[str, Any]:
        """``username``/``password`` keyword arguments for the primary's connections (redis-py)."""
        return {key: value for key, value in (("username", self.username), ("password", self.password))
                if value is not None}

    def sentinel_credentials(self) -> dict[str, Any]:
        """The same for the sentinels' connections."""
        return {key: value for key, value in (("username", self.sentinel_username),
                                              ("password", self.sentinel_password)) if value is not None}


def is_sentinel_url(url: str | None) -> bool:
    """Whether ``url`` names its Redis through sentinels (``rediss+sentinel://`` too, which
    :func:`parse` refuses with the reason)."""
    return isinstance(url, str) and url.lower().startswith((SCHEME + "://", "rediss+sentinel://"))


def parse(url: str) -> SentinelURL:
    """Read a ``redis+sentinel://`` URL; :class:`ValueError` says what is wrong with one."""
    if not is_sentinel_url(url):
        scheme = url.split("://", 1)[0] if isinstance(url, str) and "://" in url else url
        raise ValueError(f"not a {SCHEME}:// URL: {scheme!r}")
    if not url.lower().startswith(SCHEME + "://"):
        raise ValueError("rediss+sentinel:// is not supported: for TLS to the sentinels and the primary, "
                         "set MCP_SERVER['REDIS_CLIENT_FACTORY'] to a factory that returns redis-py's "
                         "Sentinel(...).master_for(...) client (docs/production.md, Redis Sentinel)")
    rest = url[len(SCHEME) + 3:]
    netloc, _, path_and_query = rest.partition("/")
    path, _, query = path_and_query.partition("?")
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        userinfo, hosts = "", netloc
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
        if not colon:  # "redis+sentinel://secret@..." is a password alone, as redis:// reads it
            username, password = None, unquote(user)
    sentinels = [_host_port(each, url) for each in hosts.split(",") if each]
    if not sentinels:
        raise ValueError(f"{SCHEME}:// URL names no sentinel (host:port, comma-separated): {_safe(url)}")
    parts = [unquote(part) for part in path.split("/") if part]
    if not parts or len(parts) > 2:
        raise ValueError(f"{SCHEME}:// URL needs the service name the sentinels monitor, then "
                         f"optionally the database number (/mymaster/0): {_safe(url)}")
    db = 0
    if len(parts) == 2:
        if not parts[1].isdigit():
            raise ValueError(f"the database in a {SCHEME}:// URL is a number, not {parts[1]!r}")
        db = int(parts[1])
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - set(_QUERY_KEYS))
    if unknown:
        raise ValueError(f"unknown {SCHEME}:// URL options: {', '.join(unknown)}; the known ones are "
                         f"{', '.join(_QUERY_KEYS)} (use REDIS_CLIENT_FACTORY for others)")
    return SentinelURL(sentinels=sentinels, service_name=parts[0], db=db, username=username,
                       password=password,
                       sentinel_username=options.get("sentinel_username", [None])[-1],
                       sentinel_password=options.get("sentinel_password", [None])[-1])


def _host_port(text: str, url: str) -> tuple[str, int]:
    parts = urlsplit(f"//{text}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname or port == -1:
        raise ValueError(f"not a sentinel host:port: {text!r} in {_safe(url)}")
    return parts.hostname, port or DEFAULT_SENTINEL_PORT


def _safe(url: str) -> str:
    """``url`` without its credentials, for error messages."""
    rest = url.split("://", 1)[-1]
    return f"{SCHEME}://{rest.rpartition('@')[2]}" if "@" in rest.partition("/")[0] else url


def channel_layer_host(url: str, **options: Any) -> dict[str, Any]:
    """One entry of channels_redis' ``hosts`` for the Redis of ``url`` (a ``redis+sentinel://``
    URL or a plain one), with ``options`` for its pool (``socket_timeout``, say)."""
    if not is_sentinel_url(url):
        return {"address": url, **options}
    parsed = parse(url)
    host = {"sentinels": parsed.sentinels, "master_name": parsed.service_name, "db": parsed.db,
            **parsed.data_credentials(), **options}
    if parsed.sentinel_credentials():
        host["sentinel_kwargs"] = parsed.sentinel_credentials()
    return host


def cache_backend(url: str) -> dict[str, Any]:
    """Django's ``CACHES`` entry of a ``RedisCache`` on ``url``: with a ``redis+sentinel://`` URL,
    through a pool that asks the sentinels for the primary (:class:`SentinelCachePool`); the
    location is a list, which Django does not split at the URL's commas."""
    backend: dict[str, Any] = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    if is_sentinel_url(url):
        parse(url)  # a wrong URL is refused at start-up, not at the first cache access
        backend.update(LOCATION=[url], OPTIONS={"pool_class": "mcp_server.redis_sentinel.SentinelCachePool"})
    return backend


class SentinelCachePool:
    """What Django's ``RedisCache`` calls as ``pool_class.from_url(LOCATION, **OPTIONS)``: redis-py's
    ``SentinelConnectionPool`` of the URL's primary (which asks the sentinels again after a
    failover)."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Any:
        from redis.sentinel import Sentinel

        parsed = parse(url)
        options.pop("db", None)
        sentinel = Sentinel(parsed.sentinels, sentinel_kwargs=parsed.sentinel_credentials() or None)
        return sentinel.master_for(parsed.service_name, db=parsed.db, **parsed.data_credentials(),
                                   **options).connection_pool


def celery_broker(url: str) -> tuple[str, dict[str, Any]]:
    """Celery's ``broker_url`` and ``broker_transport_options`` for ``url``: kombu's
    ``sentinel://`` transport (``sentinel://h1:26379/0;sentinel://h2:26379/0`` with the service
    name as ``master_name``) for a ``redis+sentinel://`` URL; any other URL as it is."""
    if not is_sentinel_url(url):
        return url, {}
    parsed = parse(url)
    credentials = ""
    if parsed.password is not None:
        from urllib.parse import quote

        credentials = f"{quote(parsed.username or '', safe='')}:{quote(parsed.password, safe='')}@"
    broker = ";".join(f"sentinel://{credentials}{host}:{port}/{parsed.db}" for host, port in parsed.sentinels)
    options: dict[str, Any] = {"master_name": parsed.service_name}
    if parsed.sentinel_credentials():
        options["sentinel_kwargs"] = parsed.sentinel_credentials()
    return broker, options
