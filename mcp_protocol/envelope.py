"""The per-request ``_meta`` envelope of the 2026-07-28 lifecycle (SEP-2575).

A modern request carries in ``params._meta`` what the handshake era negotiated once per session:
the protocol revision, the client's capabilities and identity, and the log level it wants for
this request. A request is modern exactly when the protocol-version key is present (MOD-04);
``_meta`` holding only a progress token or trace keys stays a handshake-era request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, MCPError
from .versions import MODERN_VERSIONS, is_modern_version

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
# The resultType of a 2026-07-28 result that is the answer itself (SEP-2322), not input_required
# or a task.
RESULT_COMPLETE = "complete"


@dataclass(frozen=True)
class Envelope:
    """What one modern request says about its client; nothing is kept between requests."""

    protocol_version: str
    client_capabilities: dict
    client_info: dict | None = None
    log_level: str | None = None


def meta_of(params: Any) -> dict | None:
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


def is_enveloped(params: Any) -> bool:
    """Whether ``params`` carry the modern envelope (MOD-04)."""
    meta = meta_of(params)
    return meta is not None and PROTOCOL_VERSION_KEY in meta


def parse_envelope(params: Any) -> Envelope | None:
    """The envelope of ``params``, None when there is none.

    Raises -32602 naming the offending keys when it is malformed (MOD-05), and -32022 with the
    supported and requested versions when its revision is not a modern one (MOD-06).
    """
    meta = meta_of(params)
    if meta is None or PROTOCOL_VERSION_KEY not in meta:
        return None
    version = meta[PROTOCOL_VERSION_KEY]
    capabilities = meta.get(CLIENT_CAPABILITIES_KEY)
    client_info = meta.get(CLIENT_INFO_KEY)
    bad = []
    if not isinstance(version, str):
        bad.append(PROTOCOL_VERSION_KEY)
    if not isinstance(capabilities, dict):
        bad.append(CLIENT_CAPABILITIES_KEY)
    if client_info is not None and not isinstance(client_info, dict):
        bad.append(CLIENT_INFO_KEY)
    if bad:
        raise MCPError("Invalid params: malformed _meta envelope: " + ", ".join(bad),
                       code=INVALID_PARAMS, data={"invalidKeys": bad})
    if not is_modern_version(version):
        raise unsupported_version(version)
    level = meta.get(LOG_LEVEL_KEY)
    return Envelope(version, capabilities, client_info,
                    level if isinstance(level, str) else None)


def unsupported_version(requested: object) -> MCPError:
    """-32022 with ``data: {supported, requested}`` (MOD-06, HTTP-27)."""
    return MCPError(f"Unsupported protocol version: {requested!r}",
                    code=UNSUPPORTED_PROTOCOL_VERSION,
                    data={"supported": list(MODERN_VERSIONS), "requested": requested})
