"""The Tasks extension (SEP-2663, ``io.modelcontextprotocol/tasks``): a ``tools/call`` of a
background tool answered with a task handle, which the client polls (``tasks/get``), answers
(``tasks/update``), cancels (``tasks/cancel``) or listens to (``notifications/tasks``).

A task is the background call's ``ToolCall`` record, so every process answers for every task and
the Celery worker running it writes its state. ``wire`` renders a record as a task, ``store``
holds the task-only writes, ``access`` says who may see one, ``methods`` are the three request
handlers, ``inputs`` is the worker's side of ``input_required``, ``notify`` publishes changes, and
``cleanup`` deletes expired tasks.
"""

from __future__ import annotations

from typing import Any

from mcp_protocol import methods

from ...client_capabilities import MissingRequiredClientCapabilityError

EXTENSION_ID = methods.TASKS_EXTENSION


class Tasks:
    """The extension's entry for ``Capabilities.support_extensions`` and its capability checks."""

    EXTENSION_ID = EXTENSION_ID

    @staticmethod
    def capability() -> dict[str, Any]:
        return {EXTENSION_ID: {}}

    @staticmethod
    def client_supports(client_capabilities: dict | None) -> bool:
        """Whether the request's client capabilities declare the extension."""
        extensions = (client_capabilities or {}).get("extensions")
        return isinstance(extensions, dict) and isinstance(extensions.get(EXTENSION_ID), dict)

    @staticmethod
    def server_supports(capabilities: dict | None) -> bool:
        return Tasks.client_supports(capabilities)


def missing_capability() -> MissingRequiredClientCapabilityError:
    """-32021 naming the extension (``data.requiredCapabilities.extensions``)."""
    return MissingRequiredClientCapabilityError(("extensions", EXTENSION_ID))


def request_capabilities(ctx: Any) -> dict:
    """The capabilities the request declares: its envelope's on a 2026-07-28 request; a
    handshake-era request has none for this extension, which that revision does not define."""
    envelope = getattr(ctx.session, "envelope", None)
    if envelope is None:
        return {}
    return envelope.client_capabilities or {}
