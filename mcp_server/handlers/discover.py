"""``server/discover``: what the server supports, asked without a session (MOD-01..03)."""

from __future__ import annotations

import copy
from typing import Any

from mcp_protocol.envelope import RESULT_COMPLETE, SERVER_INFO_KEY
from mcp_protocol.versions import MODERN_VERSIONS

from ..context import ServerContext
from .cache_hints import defaulted

# Flags that promise notifications only a subscriptions/listen stream delivers in this revision.
_LISTEN_FLAGS = {"tools": ("listChanged",), "prompts": ("listChanged",),
                 "resources": ("listChanged", "subscribe")}


async def discover(ctx: ServerContext) -> dict[str, Any]:
    """Answer from the server's configuration alone; the session is neither read nor changed, so
    discover is stateless in both eras (it stores no client info and initializes nothing)."""
    server = ctx.server
    version = MODERN_VERSIONS[0]
    capabilities = copy.deepcopy(server.capabilities_for(version))
    if not getattr(ctx.session, "listen_supported", True):
        # MOD-03: a transport without listen streams (stdio) cannot deliver these notifications.
        for section, flags in _LISTEN_FLAGS.items():
            if isinstance(capabilities.get(section), dict):
                for flag in flags:
                    capabilities[section].pop(flag, None)
    result: dict[str, Any] = {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": capabilities,
        "_meta": {SERVER_INFO_KEY: server.server_info_for(version)},
        **defaulted(server.ttl_ms, server.cache_scope),  # on every cacheable modern result (CACHE-03)
        "resultType": RESULT_COMPLETE,
    }
    if server.instructions is not None:
        result["instructions"] = server.instructions
    return result
