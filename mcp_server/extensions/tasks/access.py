"""Who may see a task: the caller that created it, and no one else (SEP-2663, "Auth binding").

The creator is the Django user of the session or token when there is one; else the OAuth
principal's client and subject; else nobody (an anonymous server, where the unguessable id is
the only key). Anyone else is told the task does not exist, so its existence is not leaked. A task
whose user was deleted is seen by nobody: its row stays (``owner`` is then None), and must not
pass for the task of a caller with no user.
"""

from __future__ import annotations

from typing import Any

from ...invoke import run_in_thread
from ...models import ToolCall
from . import Tasks, missing_capability


def may_see(call: ToolCall, session: Any) -> bool:
    """Whether the caller of a request (its session's user and principal) may see ``call``."""
    principal = getattr(session, "principal", None)
    return may_see_as(call, getattr(session, "user_id", None),
                      principal.to_record() if principal is not None else None)


def may_see_as(call: ToolCall, user_id: Any, principal: dict | None) -> bool:
    if call.owner_id is not None:
        return user_id is not None and str(user_id) == str(call.owner_id)
    if call.owned:  # its user was deleted
        return False
    if call.principal:
        return principal is not None and all(
            principal.get(key) == call.principal.get(key) for key in ("client_id", "subject"))
    return user_id is None and principal is None


def _visible(task_ids: list[str], user_id: Any, principal: dict | None) -> list[str]:
    calls = {call.id: call for call in ToolCall.objects.filter(id__in=set(task_ids), task=True)}
    return [task_id for task_id in task_ids
            if task_id in calls and may_see_as(calls[task_id], user_id, principal)]


async def visible_task_ids(task_ids: list[str], envelope: Any, principal: Any) -> list[str]:
    """The ``taskIds`` of a ``subscriptions/listen`` that its caller may see (others are left out
    of the acknowledgement, as unknown ids are); -32021 when the request does not declare the
    extension (SEP-2663)."""
    if not Tasks.client_supports(envelope.client_capabilities):
        raise missing_capability()
    user_id = principal.user_id if principal is not None else None
    record = principal.to_record() if principal is not None else None
    return await run_in_thread(_visible, task_ids, user_id, record)
