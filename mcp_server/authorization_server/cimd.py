"""Fetching Client ID Metadata Documents (SEP-991, draft-ietf-oauth-client-id-metadata-document)
with httpx, for the toolkit's CIMD resolver (``OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"]``).

A client_id that is an https URL is fetched by the authorization server, on a request anyone may
send: the fetch is a server-side request to a URL an attacker chooses. So the host is resolved
first and every address it resolves to must be public (not private, loopback, link-local,
multicast, reserved or unspecified; ``CIMD_ALLOW_LOOPBACK`` admits loopback for tests and
development); the connection then goes to that checked address (TLS still verifies the host name),
so a second DNS answer cannot point it elsewhere. No redirects, a bounded body.

``CIMD_FETCH_TIMEOUT`` bounds the whole fetch, the DNS lookup included: a per-read timeout would
let a server that sends a byte every few seconds hold the request (and one of the toolkit's few
fetch slots per process) for as long as it likes. The fetch runs on an event loop of its own under
one deadline; the lookup runs on a small pool of threads, waited for no longer than the deadline.

The toolkit keeps what was fetched as the client's Application row, fresh for the document's
Cache-Control max-age bounded by ``CIMD_CACHE_TIMEOUT``, in the database every process shares; a
failed fetch is remembered in Django's cache for ``CIMD_FAILURE_BACKOFF_SECONDS`` (the toolkit's
setting, a minute), for its host: a client naming another URL of that host (another query string,
another path) is not fetched either, so a slow host cannot be asked again and again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import ipaddress
import re
import socket
import ssl
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from django.core.cache import cache
from oauth2_provider.cimd import CIMDError
from oauth2_provider.settings import oauth2_settings

from mcp_protocol.jsonrpc import DecodeError, decode

from ..settings import mcp_settings
from .redirect_uris import problems
from .registration import MAX_CONTAINERS, MAX_DEPTH, client_name_problem

_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)", re.IGNORECASE)
# DNS lookups under way at once in a process: a lookup past its deadline keeps its thread until
# the resolver gives up, so the pool is bounded and a lookup finding it full fails at once.
MAX_LOOKUPS = 8
_lookups = threading.BoundedSemaphore(MAX_LOOKUPS)
_resolver = concurrent.futures.ThreadPoolExecutor(MAX_LOOKUPS, thread_name_prefix="mcp-cimd-dns")
HOST_BACKOFF_PREFIX = "mcp:cimd:host-backoff:"
T = TypeVar("T")


class Busy(CIMDError):
    """This process cannot fetch now (its lookups are all taken): no fault of the host's."""


def check_client_id_url(client_id: str) -> Any:
    """The parts of a valid CIMD client_id URL: https, a host, a path, no user info or fragment."""
    parts = urlsplit(client_id)
    try:
        parts.port  # noqa: B018 - an out-of-range port raises here
    except ValueError as exc:
        raise CIMDError("the client_id URL has an invalid port") from exc
    if parts.scheme != "https" or not parts.hostname:
        raise CIMDError("the client_id URL must be https with a host")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise CIMDError("the client_id URL must not have user information or a fragment")
    if not parts.path or parts.path == "/" or any(s in (".", "..") for s in parts.path.split("/")):
        raise CIMDError("the client_id URL must have a path, without . or .. segments")
    return parts


def address_allowed(address: str, *, allow_loopback: bool) -> bool:
    """Whether a fetch may connect to ``address``: a public one (or loopback when allowed)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv4 inside IPv6 (mapped, 6to4, NAT64) is judged as the IPv4 it carries.
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in ipaddress.ip_network("64:ff9b::/96"):
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            ip = embedded
    if ip.is_loopback:
        return allow_loopback
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_link_local
                                 or ip.is_private or ip.is_unspecified)


async def resolve(host: str, port: int, *, allow_loopback: bool) -> list[str]:
    """Every address ``host`` resolves to, all of them allowed, or CIMDError."""
    if not _lookups.acquire(blocking=False):
        raise Busy(f"{MAX_LOOKUPS} DNS lookups of client_id hosts are under way in this process")
    # The place is given back when the lookup ends, which may be after the fetch that asked for it
    # stopped waiting (or when it is cancelled before it started).
    lookup = _resolver.submit(socket.getaddrinfo, host, port, proto=socket.IPPROTO_TCP)
    lookup.add_done_callback(lambda _: _lookups.release())
    try:
        infos = await asyncio.wrap_future(lookup)
    except (socket.gaierror, UnicodeError) as exc:
        raise CIMDError(f"the client_id host does not resolve: {exc}") from exc
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    refused = [a for a in addresses if not address_allowed(a, allow_loopback=allow_loopback)]
    if refused or not addresses:
        # One internal address refuses the host: a split answer must not reach inside.
        raise CIMDError(f"the client_id host resolves to an address that is not public ({refused})")
    return addresses


def max_age(cache_control: str | None) -> int:
    floor = oauth2_settings.CIMD_METADATA_MIN_AGE_SECONDS
    ceiling = oauth2_settings.CIMD_METADATA_MAX_AGE_SECONDS
    age = ceiling
    if cache_control:
        if "no-store" in cache_control.lower() or "no-cache" in cache_control.lower():
            age = floor
        elif match := _MAX_AGE.search(cache_control):
            age = int(match.group(1))
    return max(floor, min(age, ceiling))


def check_document(client_id: str, document: Any) -> dict:
    """The document, if it is a valid one for ``client_id``; CIMDError says what is wrong.

    Everything the toolkit would refuse after the fetch is refused here, so that the host's
    backoff covers it too: a public client of the code flow, with a name and bounded redirect URIs.
    """
    if not isinstance(document, dict):
        raise CIMDError("the client metadata document must be a JSON object")
    if document.get("client_id") != client_id:
        raise CIMDError("the document's client_id is not the URL it was fetched from")
    if not isinstance(document.get("client_name"), str) or not document["client_name"].strip():
        raise CIMDError("the document must have a client_name")
    reason = client_name_problem(document["client_name"])
    if reason is not None:
        raise CIMDError(reason)
    if document.get("token_endpoint_auth_method", "none") != "none" or "client_secret" in document \
            or "client_secret_expires_at" in document:
        raise CIMDError("a metadata document client is public: token_endpoint_auth_method none, no secret")
    grant_types = document.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or set(grant_types) - {"refresh_token"} != {"authorization_code"}:
        raise CIMDError("a metadata document client uses authorization_code (with refresh_token)")
    conf = mcp_settings.AUTHORIZATION_SERVER
    reasons = problems(document.get("redirect_uris"), max_count=conf["MAX_REDIRECT_URIS"],
                       max_length=conf["MAX_REDIRECT_URI_LENGTH"])
    if reasons:
        raise CIMDError("; ".join(reasons))
    return document


def _host_key(host: str) -> str:
    return HOST_BACKOFF_PREFIX + hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()


def host_backed_off(host: str) -> bool:
    return bool(cache.get(_host_key(host)))


def back_off(host: str) -> None:
    cache.set(_host_key(host), True, oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS)


def run_within(seconds: float, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on an event loop of its own, cut off after ``seconds`` (CIMDError). From a
    thread that runs an event loop already, on a thread of its own."""
    async def bounded() -> T:
        try:
            async with asyncio.timeout(seconds):
                return await work
        except TimeoutError:
            raise CIMDError(f"the client metadata document was not fetched within {seconds:g} s "
                            "(CIMD_FETCH_TIMEOUT)") from None

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, bounded()).result()


class MetadataFetcher:
    """``fetch(client_id) -> (document, max_age)``, the toolkit's fetcher interface."""

    def fetch(self, client_id: str) -> tuple[dict, int]:
        conf = mcp_settings.AUTHORIZATION_SERVER
        parts = check_client_id_url(client_id)
        host = parts.hostname
        if host_backed_off(host):
            raise CIMDError(f"a fetch from {host} failed less than "
                            f"{oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS} s ago: none of its documents "
                            "is fetched until then")
        try:
            return run_within(float(conf["CIMD_FETCH_TIMEOUT"]), self._fetch(client_id, parts, conf))
        except Busy:
            raise
        except Exception:
            back_off(host)
            raise

    async def _fetch(self, client_id: str, parts: Any, conf: dict[str, Any]) -> tuple[dict, int]:
        port = parts.port or 443
        addresses = await resolve(parts.hostname, port, allow_loopback=conf["CIMD_ALLOW_LOOPBACK"])
        verify: Any = ssl.create_default_context(cafile=conf["CIMD_CA_BUNDLE"]) if conf["CIMD_CA_BUNDLE"] \
            else True
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        error: Exception | None = None
        for address in addresses:
            host = f"[{address}]" if ":" in address else address
            try:
                # The deadline of run_within bounds it all; httpx's own timeouts only stop a
                # connection that would wait longer than the whole fetch may.
                async with httpx.AsyncClient(verify=verify, timeout=float(conf["CIMD_FETCH_TIMEOUT"]),
                                             follow_redirects=False, trust_env=False) as client, \
                        client.stream("GET", f"https://{host}:{port}{target}",
                                      headers={"host": parts.netloc, "accept": "application/json"},
                                      extensions={"sni_hostname": parts.hostname}) as response:
                    return await self._read(client_id, response, conf["CIMD_MAX_DOCUMENT_BYTES"])
            except httpx.HTTPError as exc:
                error = exc
        raise CIMDError(f"the client metadata document could not be fetched: {error!r}")

    @staticmethod
    async def _read(client_id: str, response: httpx.Response, limit: int) -> tuple[dict, int]:
        if response.status_code != 200:
            raise CIMDError(f"the client metadata document answered HTTP {response.status_code} "
                            "(redirects are not followed)")
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
            raise CIMDError(f"the client metadata document is not JSON ({kind!r})")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise CIMDError(f"the client metadata document is larger than {limit} bytes")
        try:
            # Bounded as a registration's body: nesting, containers, NUL and lone surrogates.
            document = decode(bytes(body), max_depth=MAX_DEPTH, max_containers=MAX_CONTAINERS)
        except DecodeError as exc:
            raise CIMDError(f"the client metadata document is not valid JSON: {exc.message}") from exc
        return check_document(client_id, document), max_age(response.headers.get("cache-control"))
