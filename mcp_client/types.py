"""Small typed views of what servers send back; ``raw`` keeps the whole wire object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_protocol.envelope import SERVER_INFO_KEY

from .errors import ValidationError


@dataclass(frozen=True)
class Tool:
    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict = field(default_factory=dict)
    output_schema: dict | None = None
    annotations: dict | None = None
    icons: list | None = None
    meta: dict | None = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict) -> Tool:
        return cls(
            name=data["name"], title=data.get("title"), description=data.get("description"),
            input_schema=data.get("inputSchema") or {}, output_schema=data.get("outputSchema"),
            annotations=data.get("annotations"), icons=data.get("icons"), meta=data.get("_meta"),
            raw=data,
        )


@dataclass(frozen=True)
class Prompt:
    name: str
    title: str | None = None
    description: str | None = None
    arguments: list = field(default_factory=list)
    meta: dict | None = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict) -> Prompt:
        return cls(name=data["name"], title=data.get("title"), description=data.get("description"),
                   arguments=data.get("arguments") or [], meta=data.get("_meta"), raw=data)


@dataclass(frozen=True)
class Resource:
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    meta: dict | None = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict) -> Resource:
        return cls(uri=data["uri"], name=data.get("name", ""), title=data.get("title"),
                   description=data.get("description"), mime_type=data.get("mimeType"),
                   size=data.get("size"), meta=data.get("_meta"), raw=data)


@dataclass(frozen=True)
class ResourceTemplate:
    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    meta: dict | None = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict) -> ResourceTemplate:
        return cls(uri_template=data["uriTemplate"], name=data.get("name", ""),
                   title=data.get("title"), description=data.get("description"),
                   mime_type=data.get("mimeType"), meta=data.get("_meta"), raw=data)


# The values of ``cacheScope`` the 2026-07-28 revision defines.
CACHE_SCOPES = ("public", "private")


@dataclass(frozen=True)
class Page:
    """One page of a list result: ``items``, the cursor of the next page (None on the last), and
    the server's cache hints for it (``ttl_ms``, ``cache_scope``; None when it sent none)."""

    items: list
    next_cursor: str | None = None
    meta: dict | None = None
    ttl_ms: int | None = None
    cache_scope: str | None = None

    # The names the Ruby SDK uses for each list's items.
    @property
    def tools(self) -> list:
        return self.items

    @property
    def prompts(self) -> list:
        return self.items

    @property
    def resources(self) -> list:
        return self.items

    @property
    def resource_templates(self) -> list:
        return self.items


@dataclass(frozen=True)
class CallToolResult:
    content: list
    is_error: bool = False
    structured_content: Any = None
    meta: dict | None = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: dict) -> CallToolResult:
        return cls(content=data.get("content") or [], is_error=bool(data.get("isError", False)),
                   structured_content=data.get("structuredContent"), meta=data.get("_meta"), raw=data)

    @property
    def text(self) -> str:
        """The text blocks of the content, joined."""
        return "\n".join(block.get("text", "") for block in self.content if block.get("type") == "text")


@dataclass(frozen=True)
class DiscoverResult:
    """A ``server/discover`` answer (2026-07-28): the revisions, capabilities and identity of the
    server, and how long (``ttl_ms``) and for whom (``cache_scope``) the answer may be kept."""

    supported_versions: list[str]
    capabilities: dict
    server_info: dict | None = None
    instructions: str | None = None
    ttl_ms: int | None = None
    cache_scope: str | None = None
    meta: dict | None = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, data: Any) -> DiscoverResult:
        """Raises ``ValidationError`` for an answer that is not an object, or names no
        capabilities object or no list of versions."""
        if not isinstance(data, dict):
            raise ValidationError(f"the server/discover result is not an object: {data!r}")
        versions, capabilities = data.get("supportedVersions"), data.get("capabilities")
        if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
            raise ValidationError(f"the server/discover result has no supportedVersions list: {data!r}")
        if not isinstance(capabilities, dict):
            raise ValidationError(f"the server/discover result has no capabilities object: {data!r}")
        meta = data.get("_meta") if isinstance(data.get("_meta"), dict) else None
        # The server's identity rides in _meta; a top-level serverInfo is accepted too.
        server_info = (meta or {}).get(SERVER_INFO_KEY) or data.get("serverInfo")
        instructions = data.get("instructions")
        return cls(supported_versions=list(versions), capabilities=capabilities,
                   server_info=server_info if isinstance(server_info, dict) else None,
                   instructions=instructions if isinstance(instructions, str) else None,
                   **cache_hints(data), meta=meta, raw=data)


def cache_hints(result: dict) -> dict[str, Any]:
    """``ttl_ms`` and ``cache_scope`` of a cacheable result (CACHE-06): None where the server sent
    none, or something the revision does not allow (a negative or non-integer ttl, say)."""
    ttl, scope = result.get("ttlMs"), result.get("cacheScope")
    return {"ttl_ms": ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl >= 0 else None,
            "cache_scope": scope if scope in CACHE_SCOPES else None}
