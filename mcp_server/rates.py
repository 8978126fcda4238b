"""Rates written as DRF writes throttle rates: ``"number/period"``, the period's first letter s, m,
h or d (``"20/hour"``). The authorization server's throttles and the rate-limit middleware read them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

_RATE = re.compile(r"^\s*(\d+)\s*/\s*([smhd])[a-z]*\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Rate:
    count: int
    seconds: int

    @classmethod
    def parse(cls, text: object, setting: str) -> Rate | None:
        """The rate ``text`` names (None: no limit); ImproperlyConfigured saying which ``setting``."""
        if text is None:
            return None
        match = _RATE.match(text) if isinstance(text, str) else None
        if match is None or int(match.group(1)) < 1:
            raise ImproperlyConfigured(
                f"{setting} must be None or 'number/period' with a positive number and a period of "
                f"s, m, h or d (as '20/hour'), not {text!r}")
        return cls(int(match.group(1)), _SECONDS[match.group(2)])
