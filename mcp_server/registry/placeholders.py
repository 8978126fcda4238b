"""``{name}`` placeholders in the texts administrators write (prompt messages, resource templates).

Only plain names: no attribute or index access, no format specs or conversions (``str.format``
would reach into objects); ``{{`` and ``}}`` are literal braces.
"""

from __future__ import annotations

import string
from collections.abc import Mapping

_FORMATTER = string.Formatter()


def placeholders(text: str) -> list[str]:
    """The names ``text`` uses, in order; raises ValueError for anything but ``{name}``."""
    names = []
    try:
        parsed = list(_FORMATTER.parse(text))
    except ValueError as exc:
        raise ValueError(f"unbalanced braces: {exc}; write {{{{ and }}}} for literal braces") from None
    for _literal, field, spec, conversion in parsed:
        if field is None:
            continue
        if not field.isidentifier() or spec or conversion:
            shown = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise ValueError(f"{{{shown}}} is not a placeholder: use {{name}} with a plain name")
        names.append(field)
    return names


def render(text: str, values: Mapping[str, object]) -> str:
    """``text`` with each ``{name}`` replaced by ``values[name]`` (empty when absent)."""
    parts = []
    for literal, field, _spec, _conversion in _FORMATTER.parse(text):
        parts.append(literal)
        if field is not None:
            value = values.get(field)
            parts.append("" if value is None else str(value))
    return "".join(parts)
