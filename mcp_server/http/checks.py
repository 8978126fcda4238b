"""Checks of an HTTP request before any JSON-RPC is read: host, origin, media types, version."""

from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from django.http.request import split_domain_port, validate_host

from mcp_protocol import methods, versions
from mcp_protocol.errors import HEADER_MISMATCH

from .errors import HTTPError
from .request import Request

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
DEFAULT_PORTS = {"http": 80, "https": 443}


# What no header value may hold (RFC 9110: field values are visible characters, spaces and tabs).
# Servers such as daphne refuse them already; others hand them on, and a NUL in a session id
# would reach the database, which cannot take it.
_CONTROL_CHARACTER = re.compile("[\x00-\x08\x0a-\x1f\x7f]")


def check_header_values(request: Request) -> None:
    if _CONTROL_CHARACTER.search("".join(request.headers.values())) is None:
        return  # one search of them all: this runs on every request
    for name, value in request.headers.items():
        if _CONTROL_CHARACTER.search(value):
            raise HTTPError(400, f"Bad Request: control character in the {name} header")


def check_host_and_origin(request: Request, allowed_hosts: list[str],
                          allowed_origins: list[str]) -> None:
    """DNS-rebinding protection: a known Host, and an Origin of the same site or allowed."""
    host = check_host(request, allowed_hosts)
    origin = request.header("origin")
    if origin is None or origin in allowed_origins:
        return
    if host is None or not same_origin(origin, request.scheme, host):
        raise HTTPError(403, "Invalid Origin header")


def check_host(request: Request, allowed_hosts: list[str]) -> str | None:
    """A Host of loopback or ``allowed_hosts`` (403 otherwise); returns it."""
    host = request.header("host")
    if host is not None and not _host_allowed(host, tuple(allowed_hosts)):
        raise HTTPError(403, "Invalid Host header")
    return host


@lru_cache(maxsize=256)
def _host_allowed(host: str, allowed_hosts: tuple[str, ...]) -> bool:
    # Kept per Host value: a deployment sees a handful, and parsing one costs a tenth of what
    # the rest of these checks cost together.
    domain, _port = split_domain_port(host)  # lower case; "[::1]" keeps its brackets
    return bool(domain in LOOPBACK_HOSTS or host in allowed_hosts or (
        domain and validate_host(domain, list(allowed_hosts))
    ))


def same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether ``origin`` names ``scheme://host``; a malformed Origin or Host is a 400."""
    origin_scheme, origin_host, origin_port = _site(origin.lower(), "Origin")
    if not origin_scheme or not origin_host:
        return False
    _scheme, target_host, target_port = _site(f"{scheme}://{host.lower()}", "Host")
    return (origin_scheme, origin_host, origin_port or DEFAULT_PORTS.get(origin_scheme)) == (
        scheme, target_host, target_port or DEFAULT_PORTS.get(scheme))


def _site(url: str, header: str) -> tuple[str, str | None, int | None]:
    try:
        parts = urlsplit(url)
        return parts.scheme, parts.hostname, parts.port
    except ValueError:  # a port that is not a number or past 65535, an unclosed "[" ...
        raise HTTPError(400, f"Bad Request: malformed {header} header") from None


# Session.origin is a CharField of this length; a longer Origin cannot be kept with the session.
MAX_ORIGIN_LENGTH = 255


def check_origin_storable(request: Request) -> None:
    """The Origin a new session keeps must fit its column and hold no control character."""
    origin = request.header("origin") or ""
    if len(origin) > MAX_ORIGIN_LENGTH or not origin.isprintable():
        raise HTTPError(400, f"Bad Request: the Origin header must be at most {MAX_ORIGIN_LENGTH} "
                        "printable characters")


def _media_types(value: str | None) -> list[str]:
    if not value:
        return []
    return [part.split(";", 1)[0].strip().lower() for part in value.split(",")]


def check_post_accept(request: Request, json_only: bool) -> None:
    if not _post_accepts(request.header("accept"), json_only):
        needs = ["application/json"] if json_only else ["application/json", "text/event-stream"]
        raise HTTPError(
            406, f"Not Acceptable: the Accept header must include {' and '.join(needs)}"
        )


@lru_cache(maxsize=256)
def _post_accepts(value: str | None, json_only: bool) -> bool:
    # Kept per header value: clients send the same one or two on every request.
    accepted = _media_types(value)
    needs = ["application/json"] if json_only else ["application/json", "text/event-stream"]
    return "*/*" in accepted or all(media in accepted for media in needs)


def check_get_accept(request: Request) -> None:
    if "text/event-stream" not in _media_types(request.header("accept")):
        raise HTTPError(406, "Not Acceptable: the Accept header must include text/event-stream")


def check_content_type(request: Request) -> None:
    if not _is_json(request.header("content-type")):
        raise HTTPError(415, "Unsupported Media Type: the Content-Type must be application/json")


@lru_cache(maxsize=256)
def _is_json(value: str | None) -> bool:
    return _media_types(value)[:1] == ["application/json"]


def check_protocol_version(request: Request) -> str:
    """The revision a request speaks, from its MCP-Protocol-Version header."""
    version = request.header("mcp-protocol-version")
    if version is None:
        return versions.DEFAULT_NEGOTIATED_VERSION
    if not versions.is_handshake_version(version):
        supported = ", ".join(versions.HANDSHAKE_VERSIONS)
        raise HTTPError(
            400, f"Bad Request: unsupported MCP-Protocol-Version {version!r} (supported: {supported})",
            data={"supported": list(versions.HANDSHAKE_VERSIONS), "requested": version},
        )
    return version


BASE64_PREFIX, BASE64_SUFFIX = "=?base64?", "?="


def check_standard_headers(request: Request, method: str | None, params: Any, request_id: Any) -> None:
    """``Mcp-Method`` and ``Mcp-Name``, when sent, must say what the body says (SEP-2243).

    The handshake era does not require them (only 2026-07-28 does), but a client that sends them
    and disagrees with itself is refused, so intermediaries that route on them can be trusted.
    """
    header_method = request.header("mcp-method")
    if header_method is not None and header_method.strip() != method:
        raise HTTPError(400, f"Header mismatch: Mcp-Method header value {header_method!r} does not "
                        f"match body value {method!r}", code=HEADER_MISMATCH, request_id=request_id)
    header_name = request.header("mcp-name")
    name_param = methods.NAME_PARAMS.get(method or "")
    if header_name is None or name_param is None:
        return
    value = decode_header_value(header_name.strip())
    body_value = params.get(name_param) if isinstance(params, dict) else None
    if value is None or value != body_value:
        raise HTTPError(400, f"Header mismatch: Mcp-Name header value {header_name!r} does not match "
                        f"body value {body_value!r}", code=HEADER_MISMATCH, request_id=request_id)


def decode_header_value(value: str) -> str | None:
    """A header value, decoded from the ``=?base64?...?=`` form; None when that cannot be decoded."""
    if not (value.startswith(BASE64_PREFIX) and value.endswith(BASE64_SUFFIX)):
        return value
    try:
        return base64.b64decode(value[len(BASE64_PREFIX):-len(BASE64_SUFFIX)], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
