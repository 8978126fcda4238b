"""Resources and resource templates: classes with ``contents``, ``define``, or plain data."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

from mcp_protocol.content import BlobContents, TextContents, to_wire

from ..invoke import accepts_keyword
from .base import (
    check_icons,
    check_meta,
    check_permissions,
    check_required_scopes,
    put,
    snake_case,
)

AUDIENCES = ("user", "assistant")


def check_resource_annotations(annotations: Any) -> dict | None:
    if annotations is None:
        return None
    if not isinstance(annotations, dict):
        raise ValueError("resource annotations must be a dict")
    wire = dict(annotations)
    if "last_modified" in wire:
        wire["lastModified"] = wire.pop("last_modified")
    audience = wire.get("audience")
    if audience is not None and (
        not isinstance(audience, list) or any(a not in AUDIENCES for a in audience)
    ):
        raise ValueError(f"annotation audience must be a list of 'user'/'assistant': {audience!r}")
    priority = wire.get("priority")
    if priority is not None and (
        isinstance(priority, bool) or not isinstance(priority, int | float) or not 0 <= priority <= 1
    ):
        raise ValueError(f"annotation priority must be a number from 0 to 1, not {priority!r}")
    return wire


class _ResourceBase:
    name: ClassVar[str | None] = None
    title: ClassVar[str | None] = None
    description: ClassVar[str | None] = None
    mime_type: ClassVar[str | None] = None
    annotations: ClassVar[dict | None] = None
    icons: ClassVar[list[dict] | None] = None
    meta: ClassVar[dict | None] = None
    # OAuth scopes and Django permissions a principal needs to see and read the resource.
    required_scopes: ClassVar[tuple[str, ...]] = ()
    permissions: ClassVar[tuple[str, ...]] = ()

    _handler: Callable | None = None
    _wants_context = False

    @classmethod
    def _check_common(cls, holder: Any) -> None:
        holder.annotations = check_resource_annotations(holder.annotations)
        holder.icons = check_icons(holder.icons)
        holder.meta = check_meta(holder.meta)
        holder.required_scopes = check_required_scopes(holder.required_scopes)
        holder.permissions = check_permissions(holder.permissions)

    def _init_fields(self, fields: dict[str, Any], handler: Callable | None) -> None:
        for key, value in fields.items():
            setattr(self, key, value)
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{type(self).__name__} needs a non-empty name")
        self._check_common(self)
        self._handler = handler
        self._wants_context = handler is not None and accepts_keyword(handler, "server_context")

    @property
    def readable(self) -> bool:
        """Whether this object serves its own reads (otherwise it is listed only)."""
        return self._handler is not None

    @property
    def handler(self) -> Callable | None:
        return self._handler

    @property
    def wants_context(self) -> bool:
        return self._wants_context

    def _common_entry(self, entry: dict[str, Any]) -> dict[str, Any]:
        entry["name"] = self.name
        put(entry, "title", self.title)
        put(entry, "description", self.description)
        put(entry, "mimeType", self.mime_type)
        return entry

    def _extras(self, entry: dict[str, Any]) -> dict[str, Any]:
        put(entry, "annotations", self.annotations)
        put(entry, "icons", self.icons)
        put(entry, "_meta", self.meta)
        return entry


class Resource(_ResourceBase):
    """A resource at a fixed URI.

    Subclass and implement ``contents(self, server_context=None)``; or call
    ``Resource(uri=..., name=...)`` for a listed-only resource; or use :meth:`define`.
    """

    TextContents = TextContents
    BlobContents = BlobContents

    uri: ClassVar[str | None] = None
    size: ClassVar[int | None] = None
    # False: read by its URI but left out of resources/list (a skill's supporting files, which
    # its manifest names).
    listed: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("uri") is None and "contents" in cls.__dict__:
            raise ValueError(f"resource class {cls.__name__} needs a uri")
        cls.name = cls.__dict__.get("name") or snake_case(cls.__name__)
        cls._check_common(cls)

    def __init__(self, uri: str | None = None, name: str | None = None, *,
                 handler: Callable | None = None, **fields: Any):
        if type(self) is not Resource and uri is None and name is None:
            # Inherited ``contents`` count too: a subclass of a readable class stays readable.
            own = self.contents if type(self).contents is not Resource.contents else None
            self._init_fields({}, own)
            return
        self._init_fields({"uri": uri, "name": name or type(self).name, **fields}, handler)
        if not isinstance(self.uri, str) or not self.uri:
            raise ValueError("a resource needs a uri")

    def contents(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def define(cls, handler: Callable | None = None, *, uri: str, name: str, **fields: Any) -> Any:
        """A resource whose ``handler(server_context=...)`` returns its contents."""

        def build(function: Callable) -> Resource:
            return Resource(uri=uri, name=name, handler=function, **fields)

        return build(handler) if handler is not None else build

    def to_dict(self) -> dict[str, Any]:
        entry = self._common_entry({"uri": self.uri})
        put(entry, "size", self.size)
        return self._extras(entry)

    def __repr__(self) -> str:
        return f"<Resource {self.uri}>"


_VARIABLE = re.compile(r"\{([A-Za-z0-9_]+)\}")


def template_pattern(uri_template: str) -> re.Pattern[str]:
    """RFC 6570 level 1: ``{var}`` matches one or more characters other than ``/``.

    Operator forms such as ``{+path}`` stay literal text, and values are not percent-decoded.
    """
    parts, position = [], 0
    for match in _VARIABLE.finditer(uri_template):
        parts.append(re.escape(uri_template[position:match.start()]))
        parts.append(f"(?P<{match.group(1)}>[^/]+)")
        position = match.end()
    parts.append(re.escape(uri_template[position:]))
    return re.compile("".join(parts))


class ResourceTemplate(_ResourceBase):
    """A family of resources; ``contents(**variables, server_context=None)`` serves a match."""

    uri_template: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("uri_template") is None and "contents" in cls.__dict__:
            raise ValueError(f"resource template class {cls.__name__} needs a uri_template")
        cls.name = cls.__dict__.get("name") or snake_case(cls.__name__)
        cls._check_common(cls)

    def __init__(self, uri_template: str | None = None, name: str | None = None, *,
                 handler: Callable | None = None, **fields: Any):
        if type(self) is not ResourceTemplate and uri_template is None and name is None:
            # Inherited ``contents`` count too: a subclass of a readable class stays readable.
            own = self.contents if type(self).contents is not ResourceTemplate.contents else None
            self._init_fields({}, own)
        else:
            self._init_fields(
                {"uri_template": uri_template, "name": name or type(self).name, **fields}, handler
            )
        if not isinstance(self.uri_template, str) or not self.uri_template:
            raise ValueError("a resource template needs a uri_template")
        self._pattern = template_pattern(self.uri_template)

    def contents(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def define(cls, handler: Callable | None = None, *, uri_template: str, name: str,
               **fields: Any) -> Any:
        def build(function: Callable) -> ResourceTemplate:
            return ResourceTemplate(uri_template=uri_template, name=name, handler=function, **fields)

        return build(handler) if handler is not None else build

    def match(self, uri: str) -> dict[str, str] | None:
        found = self._pattern.fullmatch(uri)
        return found.groupdict() if found else None

    def to_dict(self) -> dict[str, Any]:
        return self._extras(self._common_entry({"uriTemplate": self.uri_template}))

    def __repr__(self) -> str:
        return f"<ResourceTemplate {self.uri_template}>"


def read_result(value: Any, uri: str, mime_type: str | None = None) -> dict[str, Any]:
    """What a ``contents`` handler returned, as a ``resources/read`` result.

    Accepts one contents object or dict, a list of them, a string (text at ``uri``), bytes
    (a blob at ``uri``), both typed ``mime_type``, or a full result dict with ``contents``
    (which may carry cache hints).
    """
    if isinstance(value, dict) and "contents" in value:
        return {**value, "contents": [to_wire(c) for c in _as_list(value["contents"])]}
    if isinstance(value, str):
        value = TextContents(uri=uri, text=value, mime_type=mime_type)
    elif isinstance(value, bytes):
        value = BlobContents.from_bytes(uri, value, mime_type)
    return {"contents": [to_wire(c) for c in _as_list(value)]}


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]
