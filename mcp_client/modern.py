"""What the client adds to speak the 2026-07-28 lifecycle: the per-request ``_meta`` envelope, the
standard HTTP headers of a request, and the ``server/discover`` answer read as a connection."""

from __future__ import annotations

import base64
from typing import Any

from mcp_protocol import methods
from mcp_protocol.envelope import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
)
from mcp_protocol.errors import UNSUPPORTED_PROTOCOL_VERSION
from mcp_protocol.versions import MODERN_VERSIONS

from .errors import ValidationError

# Requests of the handshake era that the 2026-07-28 revision has no more (its ClientRequest).
HANDSHAKE_ONLY = (methods.PING, methods.LOGGING_SET_LEVEL, methods.RESOURCES_SUBSCRIBE,
                  methods.RESOURCES_UNSUBSCRIBE)



def envelope(version: str, capabilities: dict, client_info: dict) -> dict:
    return {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES_KEY: capabilities,
            CLIENT_INFO_KEY: client_info}


def enveloped(params: dict | None, meta: dict) -> dict:
    """``params`` with the envelope under ``_meta``: the caller's other keys are kept, the
    envelope's own keys win (TRACE-05: they describe this connection, not one request)."""
    merged = dict(params or {})
    merged["_meta"] = {**(merged.get("_meta") or {}), **meta}
    return merged


def supported_on_refusal(code: int, data: Any, wanted: str | None = None) -> str | None:
    """The modern revision to probe again with after a -32022 refusal whose ``data.supported``
    lists one we speak (``wanted`` alone when pinned); None otherwise."""
    if code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(data, dict):
        return None
    return mutual_version({"supportedVersions": data.get("supported")}, wanted)


def deprecated_capabilities(declared: dict) -> list[str]:
    """The declared client capabilities that 2026-07-28 deprecates (SEP-2577)."""
    return [name for name in ("roots", "sampling") if name in declared]


def mutual_version(discovered: dict, wanted: str | None = None) -> str | None:
    """The newest modern revision both sides speak (``wanted`` alone when pinned), or None."""
    offered = discovered.get("supportedVersions")
    if not isinstance(offered, list):
        return None
    candidates = [wanted] if wanted else list(MODERN_VERSIONS)
    mutual = [version for version in candidates if version in offered]
    return max(mutual) if mutual else None


def connection_info(discovered: Any, version: str) -> dict:
    """The discover result in the shape of an ``initialize`` result, so that the client's readers
    (``protocol_version``, ``server_capabilities``, ``instructions``, ``server_implementation``)
    answer the same in either era."""
    if not isinstance(discovered, dict) or not isinstance(discovered.get("capabilities"), dict):
        raise ValidationError(f"the server's server/discover result is not usable: {discovered!r}")
    meta = discovered.get("_meta") if isinstance(discovered.get("_meta"), dict) else {}
    info: dict[str, Any] = {"protocolVersion": version, "capabilities": discovered["capabilities"],
                            "serverInfo": meta.get(SERVER_INFO_KEY) or discovered.get("serverInfo")}
    if isinstance(discovered.get("instructions"), str):
        info["instructions"] = discovered["instructions"]
    return info


def header_value(value: Any) -> str:
    """A header value as SEP-2243 carries it: plain when it is safe ASCII, else base64-wrapped."""
    text = value if isinstance(value, str) else _scalar(value)
    if text.isascii() and text.isprintable() and text == text.strip():
        return text
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def request_headers(message: dict, version: str) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` of one modern message."""
    headers = {"mcp-protocol-version": version}
    method = message.get("method")
    if isinstance(method, str):
        headers["mcp-method"] = method
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        name_param = methods.NAME_PARAMS.get(method)
        if name_param is not None and name_param in params:
            headers["mcp-name"] = header_value(params[name_param])
    return headers
