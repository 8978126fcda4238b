"""Per-primitive OAuth scopes, Django permissions and groups (``Tool(..., required_scopes=[...],
permissions=[...], groups=[...])``, ``mcp_server.curate(tool, permission=..., groups=[...])``, and
the same on prompts, resources and resource templates).

A principal without them does not see the primitive in lists. Using it is refused: lacking a
permission, it is unknown (as an entry an administrator restricted); lacking a scope, the request
is refused naming the scopes (403 ``insufficient_scope`` over HTTP, so the client can step up; a
JSON-RPC error elsewhere, where there is no token to upgrade). Scopes come from a token: a
principal of the session cookie holds none. These checks go with the registry's restrictions
(``mcp_server.registry``): the same view, the same cached grants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp_protocol.errors import INVALID_REQUEST, MCPError

from . import access
from .overlay import KINDS, View

if TYPE_CHECKING:
    from ..context import ServerContext
    from ..server import Server

# The method that uses each kind of primitive, and the param naming it.
USES = {"tools/call": ("tools", "name"), "prompts/get": ("prompts", "name"),
        "resources/read": ("resources", "uri")}
_SINGULAR = {"tools": "tool", "prompts": "prompt", "resources": "resource",
             "resource_templates": "resource template"}


class InsufficientScopeError(MCPError):
    """The principal lacks OAuth scopes a primitive requires (``data.requiredScopes``)."""

    def __init__(self, kind: str, key: str, scopes: tuple[str, ...]):
        super().__init__(f"Forbidden: the {_SINGULAR.get(kind, kind)} {key!r} needs the scopes "
                         f"{' '.join(scopes)}", code=INVALID_REQUEST, data={"requiredScopes": list(scopes)})
        self.scopes = scopes


def is_guarded(primitive: Any) -> bool:
    return bool(getattr(primitive, "required_scopes", ()) or _needs_grant(primitive))


def _needs_grant(primitive: Any) -> bool:
    return bool(getattr(primitive, "permissions", ()) or getattr(primitive, "groups", ()))


def lacking_scopes(primitive: Any, principal: Any) -> tuple[str, ...]:
    """The primitive's scopes when the principal lacks any of them, else ()."""
    scopes = getattr(primitive, "required_scopes", ())
    if not scopes:
        return ()
    held = principal.scopes if principal is not None else frozenset()
    return () if held.issuperset(scopes) else tuple(scopes)


def permitted(primitive: Any, grant: access.Grant | None) -> bool:
    """Whether ``grant`` holds every permission of ``primitive`` and, when it names groups, one
    of them (a superuser holds everything)."""
    permissions, groups = getattr(primitive, "permissions", ()), getattr(primitive, "groups", ())
    if not permissions and not groups:
        return True
    if grant is None or not grant.active:
        return False
    if grant.superuser:
        return True
    return grant.permissions.issuperset(permissions) and (
        not groups or not grant.group_names.isdisjoint(groups))


async def grant_of(user_id: Any) -> access.Grant | None:
    return None if user_id is None else await access.grant_for(user_id)


async def visible(registry: Any, principal: Any, user_id: Any) -> View:
    """What of ``registry`` the principal may see."""
    needs_grant = any(_needs_grant(primitive)
                      for kind in KINDS for primitive in getattr(registry, kind).values())
    grant = await grant_of(user_id) if needs_grant else None
    view = View()
    for kind in KINDS:
        getattr(view, kind).update(
            (key, primitive) for key, primitive in getattr(registry, kind).items()
            if permitted(primitive, grant) and not lacking_scopes(primitive, principal))
    return view


async def registry_seen_by(server: Server, principal: Any, user_id: Any) -> Any:
    """What a request of ``principal`` (Django user ``user_id``) may see, before it has a session:
    the view :meth:`Server.registry_view` gives its session."""
    registry = server.registry_now()
    if registry is None:
        registry = await server.registry_for(user_id)
    return await visible(registry, principal, user_id) if server.guarded else registry


async def usable(server: Server, primitive: Any, kind: str, key: str, principal: Any, user_id: Any) -> bool:
    """Whether the principal may use ``primitive``: False when a permission hides it; raises
    :class:`InsufficientScopeError` when it lacks scopes."""
    if not server.guarded or not is_guarded(primitive):
        return True
    if _needs_grant(primitive) and not permitted(primitive, await grant_of(user_id)):
        return False
    lacking = lacking_scopes(primitive, principal)
    if lacking:
        raise InsufficientScopeError(kind, key, lacking)
    return True


async def find(ctx: ServerContext, kind: str, key: str) -> Any:
    """The primitive ``key`` of ``kind`` this request may use, None when it is unknown to it."""
    server, session = ctx.server, ctx.session
    registry = server.registry_now()
    if registry is None:
        registry = await server.registry_for(session.user_id)
    primitive = getattr(registry, kind).get(key)
    if primitive is None:
        return None
    if not server.guarded:  # what usable() says first, without its coroutine
        return primitive
    return primitive if await usable(server, primitive, kind, key, session.principal, session.user_id) \
        else None


def used_by(registry: Any, method: str | None, params: Any) -> tuple[str, str, Any] | None:
    """The primitive a request of ``method`` uses: (kind, key, primitive), None when it names none."""
    use = USES.get(method or "")
    if use is None or not isinstance(params, dict) or not isinstance(params.get(use[1]), str):
        return None
    kind, key = use[0], params[use[1]]
    primitive = getattr(registry, kind).get(key)
    if primitive is None and kind == "resources":
        for template in registry.resource_templates.values():
            if template.readable and template.match(key) is not None:
                return "resource_templates", key, template
    return (kind, key, primitive) if primitive is not None else None
