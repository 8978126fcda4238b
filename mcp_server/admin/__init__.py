"""The MCP server in Django admin (found by admin's autodiscovery): the registry (``primitives``:
what code registers; ``stored``: prompts and resources defined in admin), ``sessions``, the
background ``calls`` and the ``audit`` trail."""

from . import audit, calls, primitives, sessions, stored

__all__ = ["audit", "calls", "primitives", "sessions", "stored"]
