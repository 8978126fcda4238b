"""What tools, prompts and resources share: names, icons, metadata and handler signatures."""

from __future__ import annotations

import re
import typing
from typing import Any

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
ICON_THEMES = ("light", "dark")


def snake_case(name: str) -> str:
    """``MyTool`` becomes ``my_tool``, ``HTTPFetcher`` becomes ``http_fetcher``."""
    return _CAMEL_BOUNDARY.sub("_", name).lower()


def check_icons(icons: Any) -> list[dict] | None:
    """Icons are ``{src, mimeType?, sizes?, theme?}``; theme is ``light`` or ``dark``."""
    if icons is None:
        return None
    if not isinstance(icons, list | tuple):
        raise ValueError("icons must be a list of {src, mimeType?, sizes?, theme?} objects")
    checked = []
    for icon in icons:
        if not isinstance(icon, dict) or not isinstance(icon.get("src"), str):
            raise ValueError(f"each icon needs a string 'src': {icon!r}")
        if "theme" in icon and icon["theme"] not in ICON_THEMES:
            raise ValueError(f"icon theme must be 'light' or 'dark', not {icon['theme']!r}")
        if "sizes" in icon and not (
            isinstance(icon["sizes"], list) and all(isinstance(s, str) for s in icon["sizes"])
        ):
            raise ValueError("icon sizes must be a list of strings such as ['48x48']")
        checked.append(dict(icon))
    return checked


def check_meta(meta: Any) -> dict | None:
    if meta is not None and not isinstance(meta, dict):
        raise ValueError("meta must be a dict")
    return meta


def put(body: dict, key: str, value: Any) -> None:
    """Set ``key`` unless ``value`` is None (optional fields are omitted, never null)."""
    if value is not None:
        body[key] = value


def check_required_scopes(scopes: Any) -> tuple[str, ...]:
    """OAuth scopes a principal needs to see and use a primitive (RFC 6749 scope tokens)."""
    if isinstance(scopes, str) or not isinstance(scopes, list | tuple | set | frozenset):
        raise ValueError(f"required_scopes must be a list of scopes, not {scopes!r}")
    return tuple(sorted(check_scope(scope, "required_scopes") for scope in scopes))


def check_permissions(permissions: Any) -> tuple[str, ...]:
    """Django permissions ("app_label.codename") a principal's user needs, all of them."""
    if isinstance(permissions, str) or not isinstance(permissions, list | tuple | set | frozenset):
        raise ValueError(f"permissions must be a list of 'app_label.codename' strings, not {permissions!r}")
    for permission in permissions:
        if not isinstance(permission, str) or permission.count(".") != 1 or " " in permission:
            raise ValueError(f"permission {permission!r} is not an 'app_label.codename' string")
    return tuple(sorted(permissions))


def check_groups(groups: Any) -> tuple[str, ...]:
    """Django group names; a user must belong to one of them."""
    if isinstance(groups, str) or not isinstance(groups, list | tuple | set | frozenset) \
            or not all(isinstance(group, str) and group for group in groups):
        raise ValueError(f"groups must be a list of Django group names, not {groups!r}")
    return tuple(sorted(groups))


def declared_asks(function: Any) -> frozenset[str]:
    """The parameters of ``function`` filled by declared asks (``Annotated[T, Resolve(...)]`` or an
    ask), which are not arguments (``mcp_server.asks``; recognized without importing it)."""
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception:  # annotations that do not evaluate declare no ask this can read
        return frozenset()
    return frozenset(
        name for name, hint in hints.items()
        if typing.get_origin(hint) is typing.Annotated
        and any(getattr(m, "resolves_parameter", False) is True for m in typing.get_args(hint)[1:])
    )


def check_scope(scope: Any, where: str) -> str:
    """A scope token of RFC 6749 3.3: printable ASCII, no space, quote or backslash."""
    if not isinstance(scope, str) or not scope or \
            any(not 0x21 <= ord(c) <= 0x7E or c in '"\\' for c in scope):
        raise ValueError(f"{where}: {scope!r} is not a scope (printable ASCII without spaces, quotes or "
                         "backslashes)")
    return scope
