"""Fetching Client ID Metadata Documents (SEP-991, draft-ietf-oauth-client-id-metadata-document)
with httpx, for the toolkit's CIMD resolver (``OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"]``).

A client_id that is an https URL is fetched by the authorization server, on a request anyone may
send: the fetch is a server-side request to a URL an attacker chooses. So the host is resolved
first and every address it resolves to must be public (not private, loopback, link-local,
multicast, reserved or unspecified; ``CIMD_ALLOW_LOOPBACK`` admits loopback for tests and
development); the connection then goes to that checked address (TLS still verifies the host name),
so a second DNS answer cannot point it elsewhere. No redirects, a bounded body, a short timeout.

The toolkit keeps what was fetched as the client's Application row, fresh for the document's
Cache-Control max-age bounded by ``CIMD_CACHE_TIMEOUT``, in the database every process shares; a
failed fetch is remembered in Django's cache for a minute, so no process fetches it again sooner.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from oauth2_provider.cimd import CIMDError
from oauth2_provider.settings import oauth2_settings

from ..settings import mcp_settings
from .redirect_uris import problems

_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)", re.IGNORECASE)


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


def resolve(host: str, port: int, *, allow_loopback: bool) -> list[str]:
    """Every address ``host`` resolves to, all of them allowed, or CIMDError."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
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
    """The document, if it is a valid one for ``client_id``; CIMDError says what is wrong."""
    if not isinstance(document, dict):
        raise CIMDError("the client metadata document must be a JSON object")
    if document.get("client_id") != client_id:
        raise CIMDError("the document's client_id is not the URL it was fetched from")
    if not isinstance(document.get("client_name"), str) or not document["client_name"].strip():
        raise CIMDError("the document must have a client_name")
    reasons = problems(document.get("redirect_uris"))
    if reasons:
        raise CIMDError("; ".join(reasons))
    return document


class MetadataFetcher:
    """``fetch(client_id) -> (document, max_age)``, the toolkit's fetcher interface."""

    def fetch(self, client_id: str) -> tuple[dict, int]:
        conf = mcp_settings.AUTHORIZATION_SERVER
        parts = check_client_id_url(client_id)
        port = parts.port or 443
        addresses = resolve(parts.hostname, port, allow_loopback=conf["CIMD_ALLOW_LOOPBACK"])
        verify: Any = ssl.create_default_context(cafile=conf["CIMD_CA_BUNDLE"]) if conf["CIMD_CA_BUNDLE"] \
            else True
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        deadline = time.monotonic() + float(conf["CIMD_FETCH_TIMEOUT"])
        error: Exception | None = None
        for address in addresses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            host = f"[{address}]" if ":" in address else address
            try:
                with httpx.Client(verify=verify, timeout=remaining, follow_redirects=False,
                                  trust_env=False) as client, client.stream(
                        "GET", f"https://{host}:{port}{target}",
                        headers={"host": parts.netloc, "accept": "application/json"},
                        extensions={"sni_hostname": parts.hostname}) as response:
                    return self._read(client_id, response, conf["CIMD_MAX_DOCUMENT_BYTES"])
            except httpx.HTTPError as exc:
                error = exc
        raise CIMDError(f"the client metadata document could not be fetched: {error!r}")

    @staticmethod
    def _read(client_id: str, response: httpx.Response, limit: int) -> tuple[dict, int]:
        if response.status_code != 200:
            raise CIMDError(f"the client metadata document answered HTTP {response.status_code} "
                            "(redirects are not followed)")
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json" and not (kind.startswith("application/") and kind.endswith("+json")):
            raise CIMDError(f"the client metadata document is not JSON ({kind!r})")
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > limit:
                raise CIMDError(f"the client metadata document is larger than {limit} bytes")
        try:
            document = json.loads(body)
        except ValueError as exc:
            raise CIMDError("the client metadata document is not valid JSON") from exc
        return check_document(client_id, document), max_age(response.headers.get("cache-control"))
