"""``skills/list``, ``skills/get`` and ``resources/directory/read`` (SEP-2640).

Each is refused with -32601 where the server does not declare the extension; a request sees
the skills its registry view holds (restrictions set in admin apply to skills as to resources).
Their results carry the cache hints of SEP-2549 on a 2026-07-28 request, as every list does.
"""

from __future__ import annotations

from typing import Any

from mcp_protocol.errors import METHOD_NOT_FOUND, InvalidParamsError, MCPError

from ...handlers import cache_hints
from ...handlers.pagination import page
from ...handlers.params import as_object, required_string
from . import Skills
from .catalog import visible_skills
from .loading import DIRECTORY_MIME_TYPE, SCHEME


async def list_skills(ctx: Any) -> dict[str, Any]:
    params = as_object(ctx.params, "skills/list")
    skills = await _skills(ctx)
    # A whole entry per item: a skill's manifest is never split across pages.
    entries, next_cursor = page([skill.entry() for skill in skills], params, ctx.server.page_size)
    result: dict[str, Any] = {"skills": entries}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return _hinted(ctx, result)


async def get_skill(ctx: Any) -> dict[str, Any]:
    params = as_object(ctx.params, "skills/get")
    uri = required_string(params, "uri", "skills/get")
    for skill in await _skills(ctx):
        if skill.uri == uri:
            return _hinted(ctx, {"skill": skill.entry()})
    raise InvalidParamsError(f"Invalid params: no skill is served at {uri}")


async def read_directory(ctx: Any) -> dict[str, Any]:
    """The direct children of a skill's folder, or of a folder inside it: files as resources,
    folders as ``inode/directory`` resources a client may read in turn."""
    params = as_object(ctx.params, "resources/directory/read")
    uri = required_string(params, "uri", "resources/directory/read").rstrip("/")
    for skill in await _skills(ctx):
        if uri != skill.root and not uri.startswith(skill.root + "/"):
            continue
        relative = uri[len(skill.root) + 1:]
        if relative and relative not in skill.directories:
            break
        prefix = f"{relative}/" if relative else ""
        children: dict[str, dict[str, Any]] = {}
        for path, file in skill.files.items():
            if not path.startswith(prefix):
                continue
            head, _, rest = path[len(prefix):].partition("/")
            child = skill.file_uri(prefix + head)
            if rest:
                children.setdefault(child, {"uri": child, "name": head, "mimeType": DIRECTORY_MIME_TYPE})
            else:
                children[child] = {"uri": child, "name": head, "mimeType": file.mime_type, "size": file.size}
        items, next_cursor = page(list(children.values()), params, ctx.server.page_size)
        result: dict[str, Any] = {"resources": items}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        return _hinted(ctx, result)
    is_file = uri.startswith(SCHEME) and await _is_file(ctx, uri)
    kind = "a file, not a directory" if is_file else "no directory"
    raise InvalidParamsError(f"Invalid params: {uri} is {kind} this server serves")


async def _skills(ctx: Any) -> list:
    if not Skills.server_supports(ctx.server.capabilities_for(ctx.protocol_version or "")):
        raise MCPError(f"Method not found: {ctx.method} (this server does not declare the "
                       f"{Skills.EXTENSION_ID} extension)", code=METHOD_NOT_FOUND)
    return visible_skills((await ctx.server.registry_view(ctx)).resources)


async def _is_file(ctx: Any, uri: str) -> bool:
    return any(uri == skill.file_uri(path) for skill in await _skills(ctx) for path in skill.files)


def _hinted(ctx: Any, result: dict[str, Any]) -> dict[str, Any]:
    server = ctx.server
    if ctx.is_modern:  # a cacheable result of the 2026-07-28 wire carries both hints
        for key, value in cache_hints.defaulted(server.ttl_ms, server.cache_scope).items():
            result.setdefault(key, value)
        return result
    return cache_hints.stamp(result, server.ttl_ms, server.cache_scope)
