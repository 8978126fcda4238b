"""What revision 2026-07-28 deprecates (SEP-2577): roots, sampling and logging (MOD-16).

Deprecated is not removed: on every handshake revision these APIs work exactly as before, and
they keep working while the revisions that have them are supported. The marker is for readers
and tools: the PEP 702 ``__deprecated__`` attribute, and a note at the end of the docstring. It
warns nobody at run time, as calling them is still correct.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

DEPRECATED_AT = "2026-07-28"
F = TypeVar("F", bound=Callable)


def deprecated_feature(feature: str, instead: str) -> Callable[[F], F]:
    """Mark an API of ``feature`` ("roots", "sampling", "logging") as deprecated at 2026-07-28."""
    message = (f"{feature} is deprecated as of MCP revision {DEPRECATED_AT} (SEP-2577) and still "
               f"works on the handshake revisions; {instead}")

    def mark(function: F) -> F:
        function.__deprecated__ = message  # type: ignore[attr-defined]
        function.__doc__ = f"{function.__doc__ or ''}\n\n.. deprecated:: {DEPRECATED_AT}\n   {message}\n"
        return function

    return mark
