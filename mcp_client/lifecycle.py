"""How ``AsyncClient`` connects: the ``initialize`` handshake, or ``server/discover`` and the
2026-07-28 lifecycle (SEP-2575), and auto mode's choice between them."""

from __future__ import annotations

import asyncio
import logging
import warnings
from typing import Any

from mcp_protocol import methods, versions
from mcp_protocol.errors import METHOD_NOT_FOUND

from . import modern, tasks
from .errors import ClientError, HTTPStatusError, ServerError, ValidationError
from .modern import mutual_version

logger = logging.getLogger("mcp_client")
LEGACY_MODE, MODERN_MODE, AUTO_MODE = "legacy", "modern", "auto"
# How long auto mode waits for a server/discover answer before falling back to initialize: a
# handshake-era stdio server may stay silent on a method it does not know.
DISCOVER_TIMEOUT = 5.0


class Lifecycle:
    """The connecting half of ``AsyncClient`` (it provides ``_request``, ``_wire``, ``_envelope``,
    ``discover_timeout`` and ``_probe_timed_out``)."""

    async def _fall_back(self, protocol_version: str | None, declared: dict, client_info: dict) -> dict:
        """The handshake after auto mode's probe; a server slower to start than the probe's bound
        may have answered it late and taken the 2026-07-28 lifecycle, refusing ``initialize``
        (-32601): then the modern lifecycle is followed after all."""
        timed_out, self._probe_timed_out = self._probe_timed_out, False
        try:
            return await self._initialize(protocol_version, declared, client_info)
        except ServerError as exc:
            if not (timed_out and exc.code == METHOD_NOT_FOUND):
                raise
        logger.info("the server refused initialize after a late server/discover: probing again")
        return await self._discover(MODERN_MODE, protocol_version, declared, client_info)

    async def _initialize(self, protocol_version: str | None, declared: dict, client_info: dict) -> dict:
        params = {"protocolVersion": protocol_version or versions.LATEST_HANDSHAKE_VERSION,
                  "capabilities": declared, "clientInfo": client_info}
        result = await self._request(methods.INITIALIZE, params)
        if not (isinstance(result, dict) and isinstance(result.get("capabilities"), dict)
                and versions.is_handshake_version(result.get("protocolVersion"))):
            raise ValidationError(f"the server's initialize result is not usable: {result!r}")
        negotiated = getattr(self._wire, "negotiated", None)
        if negotiated is not None:
            negotiated(result["protocolVersion"])
        return result

    async def _discover(self, mode: str, pinned: str | None, declared: dict,
                        client_info: dict) -> dict | None:
        """The modern connection from ``server/discover``; None (auto mode) when the server
        does not answer it or speaks no modern revision we do, so the handshake follows."""
        wanted = pinned if versions.is_modern_version(pinned) else None
        probe_version = wanted or versions.MODERN_VERSIONS[0]
        adopt = getattr(self._wire, "adopt_modern", None)
        try:
            try:
                discovered = await self._probe(mode, probe_version, declared, client_info)
            except ServerError as exc:
                # -32022 names the revisions the server speaks: one more probe with one of ours.
                retry = modern.supported_on_refusal(exc.code, exc.data, wanted)
                if retry is None:
                    raise
                discovered = await self._probe(mode, retry, declared, client_info)
        except (ServerError, HTTPStatusError, TimeoutError) as exc:
            self._leave_modern()
            self._probe_timed_out = isinstance(exc, TimeoutError)
            if mode == MODERN_MODE:
                raise ClientError(f"the server does not speak the 2026-07-28 lifecycle: "
                                  f"server/discover failed ({exc})") from exc
            logger.info("server/discover failed (%s): connecting with initialize", exc)
            return None
        version = mutual_version(discovered, wanted) if isinstance(discovered, dict) else None
        if version is None:
            self._leave_modern()
            if mode == MODERN_MODE:
                raise ClientError(f"the server supports none of the client's modern revisions "
                                  f"({wanted or ', '.join(versions.MODERN_VERSIONS)}): {discovered!r}")
            return None
        self._envelope = modern.envelope(version, tasks.declaring(declared), client_info)
        if adopt is not None:
            adopt(version)
        for deprecated in modern.deprecated_capabilities(declared):
            warnings.warn(f"the {deprecated} client capability is deprecated as of 2026-07-28 (SEP-2577); "
                          "it still works, but servers are moving to other means", DeprecationWarning,
                          stacklevel=3)
        return modern.connection_info(discovered, version)

    async def _probe(self, mode: str, version: str, declared: dict, client_info: dict) -> Any:
        """One ``server/discover`` in the envelope of ``version``; bounded in auto mode, where a
        handshake-era server may never answer it."""
        self._envelope = modern.envelope(version, tasks.declaring(declared), client_info)
        adopt = getattr(self._wire, "adopt_modern", None)
        if adopt is not None:
            adopt(version)
        if mode == AUTO_MODE:
            return await asyncio.wait_for(self._request(methods.SERVER_DISCOVER, None), self.discover_timeout)
        return await self._request(methods.SERVER_DISCOVER, None)

    def _leave_modern(self) -> None:
        self._envelope = None
        leave = getattr(self._wire, "adopt_modern", None)
        if leave is not None:
            leave(None)


def checked_mode(mode: str | None, protocol_version: str | None) -> str | None:
    """The connection mode asked for, checked against a pinned revision."""
    if mode not in (None, LEGACY_MODE, MODERN_MODE, AUTO_MODE):
        raise ValueError(f"mode must be 'auto', 'modern' or 'legacy', not {mode!r}")
    if protocol_version is None:
        return mode
    if versions.is_handshake_version(protocol_version):
        if mode == MODERN_MODE:
            raise ValueError(f"protocol_version {protocol_version!r} is a handshake revision; "
                             "mode='modern' needs a 2026-07-28 one")
        return mode
    if versions.is_modern_version(protocol_version):
        if mode == LEGACY_MODE:
            raise ValueError(f"protocol_version {protocol_version!r} is not a handshake revision; "
                             "mode='legacy' needs one")
        return MODERN_MODE
    raise ValueError(f"protocol_version {protocol_version!r} is neither a handshake nor a 2026-07-28 "
                     f"revision this client speaks ({', '.join(versions.STABLE_VERSIONS)})")
