"""How many sessions a server has, and each principal's fair share of them: counters in the shared
state, so that the limits of ``initialize`` (``MAX_SESSIONS``, ``MAX_SESSIONS_PER_PRINCIPAL``) cost
no query, however many sessions there are.

A counter gains one with each session stored (in the round trip that stores its shared-state
entry) and loses one with each session deleted: a DELETE, a refusal, the reaper, an expired
session found on load (in the round trip that removes the entry). It is counted anew from the
database when it is absent: at its first use, after the shared state lost its data, and when its
time to live (``COUNT_TTL``) ends; so one left wrong (a process killed between a row and its
counter, a row deleted by other means) is right again within that time. A count past its limit is
made again from the database before anyone is refused, and that count is kept.
"""

from __future__ import annotations

from .limits import counted_with

# How long a count lives before it is made again from the database (self-correction).
COUNT_TTL = 600.0


def server_counter(server: str) -> str:
    return f"sessions:{server}"


def principal_counter(server: str, principal: str) -> str:
    """The counter of the fair share ``principal`` is counted in (:func:`.limits.counted_with`)."""
    lookup = counted_with(principal)
    group = lookup.get("principal__startswith") or lookup["principal"]
    return f"sessions:{server}:{group}"


def count_rows(server: str, principal: str | None = None) -> int:
    """The sessions of ``server`` in the database (of ``principal``'s fair share, when given)."""
    from ..models import Session

    rows = Session.objects.filter(server=server)
    if principal is not None:
        rows = rows.filter(**counted_with(principal))
    return rows.count()


def keeps_counts(state: object) -> bool:
    """Whether the shared state has the counting operations (the built-in states do)."""
    return hasattr(state, "set_counting") and hasattr(state, "delete_uncounting")
