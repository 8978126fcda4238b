"""Content blocks (tool results, prompt messages) and resource contents."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any


def _with_extras(body: dict[str, Any], annotations: dict | None, meta: dict | None) -> dict:
    if annotations is not None:
        body["annotations"] = annotations
    if meta is not None:
        body["_meta"] = meta
    return body


@dataclass
class TextContents:
    """The contents of a text resource: ``{uri, mimeType?, text}``."""

    uri: str
    text: str
    mime_type: str | None = None
    meta: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            body["mimeType"] = self.mime_type
        body["text"] = self.text
        return _with_extras(body, None, self.meta)


@dataclass
class BlobContents:
    """The contents of a binary resource: ``{uri, mimeType?, blob}``, ``data`` already base64."""

    uri: str
    data: str
    mime_type: str | None = None
    meta: dict | None = None

    @classmethod
    def from_bytes(cls, uri: str, raw: bytes, mime_type: str | None = None) -> BlobContents:
        return cls(uri=uri, data=base64.b64encode(raw).decode("ascii"), mime_type=mime_type)

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"uri": self.uri}
        if self.mime_type is not None:
            body["mimeType"] = self.mime_type
        body["blob"] = self.data
        return _with_extras(body, None, self.meta)


@dataclass
class Text:
    text: str
    annotations: dict | None = None
    meta: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        return _with_extras({"type": "text", "text": self.text}, self.annotations, self.meta)


@dataclass
class Image:
    """An image; ``data`` is base64."""

    data: str
    mime_type: str
    annotations: dict | None = None
    meta: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        body = {"type": "image", "data": self.data, "mimeType": self.mime_type}
        return _with_extras(body, self.annotations, self.meta)


@dataclass
class Audio:
    """Audio; ``data`` is base64."""

    data: str
    mime_type: str
    annotations: dict | None = None
    meta: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        body = {"type": "audio", "data": self.data, "mimeType": self.mime_type}
        return _with_extras(body, self.annotations, self.meta)


@dataclass
class EmbeddedResource:
    """Resource contents carried inline in a tool result or prompt message."""

    resource: TextContents | BlobContents | dict
    annotations: dict | None = None
    meta: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        resource = self.resource if isinstance(self.resource, dict) else self.resource.to_dict()
        return _with_extras({"type": "resource", "resource": resource}, self.annotations, self.meta)


@dataclass
class ResourceLink:
    """A link to a resource the client may read later (revision 2025-06-18 and newer)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[dict] | None = None
    annotations: dict | None = None
    meta: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for name in ("title", "description", "size", "icons"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.mime_type is not None:
            body["mimeType"] = self.mime_type
        return _with_extras(body, self.annotations, self.meta)


ContentBlock = Text | Image | Audio | EmbeddedResource | ResourceLink


def to_wire(value: Any) -> Any:
    """A content block, resource contents or plain dict, as the dict that goes on the wire."""
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if to_dict is not None else value
