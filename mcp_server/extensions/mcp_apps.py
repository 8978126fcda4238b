"""MCP Apps (SEP-1865): interactive HTML templates that hosts render for tool results.

The server side is a convention: a ``ui://`` resource of type ``text/html;profile=mcp-app`` and
a tool whose ``_meta.ui.resourceUri`` points at it. The sandbox and bridge are the host's job.
"""

from __future__ import annotations

from typing import Any

from ..primitives.resource import Resource

EXTENSION_ID = "io.modelcontextprotocol/ui"
RESOURCE_MIME_TYPE = "text/html;profile=mcp-app"
VISIBILITIES = ("model", "app")


def _check_ui_uri(uri: str) -> None:
    if not isinstance(uri, str) or not uri.startswith("ui://"):
        raise ValueError(f"MCP Apps resources use ui:// URIs, not {uri!r}")


class Apps:
    EXTENSION_ID = EXTENSION_ID
    RESOURCE_MIME_TYPE = RESOURCE_MIME_TYPE

    @staticmethod
    def capability(mime_types: list[str] | None = None) -> dict[str, Any]:
        """The extension entry for ``Capabilities.support_extensions``."""
        return {EXTENSION_ID: {"mimeTypes": list(mime_types or [RESOURCE_MIME_TYPE])}}

    @staticmethod
    def ui_resource(uri: str, name: str, **fields: Any) -> Resource:
        """A listed resource for a UI template (serve its HTML with a read handler or subclass)."""
        _check_ui_uri(uri)
        fields.setdefault("mime_type", RESOURCE_MIME_TYPE)
        return Resource(uri=uri, name=name, **fields)

    @staticmethod
    def tool_meta(resource_uri: str, visibility: list[str] | None = None,
                  meta: dict | None = None, legacy: bool = False) -> dict[str, Any]:
        """``meta`` with ``ui.resourceUri`` (and the flat ``ui/resourceUri`` when ``legacy``)."""
        _check_ui_uri(resource_uri)
        merged = dict(meta or {})
        ui = dict(merged.get("ui") or {})
        ui["resourceUri"] = resource_uri
        if visibility is not None:
            unknown = [v for v in visibility if v not in VISIBILITIES]
            if unknown:
                raise ValueError(f"visibility entries must be 'model' or 'app': {unknown}")
            ui["visibility"] = list(visibility)
        merged["ui"] = ui
        if legacy:
            merged["ui/resourceUri"] = resource_uri
        return merged

    @staticmethod
    def client_supports(client_capabilities: dict | None,
                        mime_type: str = RESOURCE_MIME_TYPE) -> bool:
        """Whether the client declared the extension (for ``mime_type`` when it lists types)."""
        extensions = (client_capabilities or {}).get("extensions")
        if not isinstance(extensions, dict) or EXTENSION_ID not in extensions:
            return False
        settings = extensions[EXTENSION_ID]
        mime_types = settings.get("mimeTypes") if isinstance(settings, dict) else None
        return mime_types is None or mime_type in mime_types
