"""What start-up loaded, set outside the cyclic garbage collector's reach.

A web process holds a few hundred thousand objects once Django, the registry and the ASGI server
are loaded, and none of them is ever garbage. Python's full collections walk them all the same:
tens of milliseconds each, on the request that happens to trigger one. ``gc.freeze()`` moves them
to a generation the collector never walks, so a full collection costs what requests made since
(docs/performance.md, "The tail at concurrency 1"). Objects frozen are still freed by reference
counting; only a reference cycle among them, formed later, would stay.
"""

from __future__ import annotations

import gc

from django.core.exceptions import ImproperlyConfigured

from ..settings import mcp_settings

_frozen = False


def freeze_startup_objects() -> bool:
    """``gc.freeze()`` after a full collection, once per process, unless
    ``MCP_SERVER["FREEZE_STARTUP_OBJECTS"]`` is False; True when it froze. ``get_asgi_application``
    calls it; a project building its own ``ProtocolTypeRouter`` calls it at the end of its ASGI
    module."""
    global _frozen
    enabled = mcp_settings.FREEZE_STARTUP_OBJECTS
    if not isinstance(enabled, bool):
        raise ImproperlyConfigured(f"MCP_SERVER['FREEZE_STARTUP_OBJECTS'] must be True or False, "
                                   f"not {enabled!r}")
    if not enabled or _frozen:
        return False
    gc.collect()
    gc.freeze()
    _frozen = True
    return True
