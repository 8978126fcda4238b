"""The MCP server in Django admin (found by admin's autodiscovery): the registry (``primitives``:
what code registers; ``stored``: prompts and resources defined in admin), ``sessions`` and the
background ``calls``."""

from . import calls, primitives, sessions, stored

__all__ = ["calls", "primitives", "sessions", "stored"]
