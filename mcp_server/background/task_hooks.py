"""The port through which background calls reach the Tasks extension, which sits on top of them.

A call of a background tool becomes a task when the extension says so; its record is then the
task's, its questions go on the record, and each change of its status is published. Background
calls never import the extension: it registers a :class:`TaskHooks` (``ports.register``) when the
site is installed, and without one no call is a task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from mcp_protocol import methods

from .. import ports
from ..client_capabilities import MissingRequiredClientCapabilityError

if TYPE_CHECKING:
    from mcp_protocol.envelope import Envelope

    from ..context import ServerContext
    from ..http.runtime import Runtime
    from ..http.transport import StreamableHTTPTransport
    from ..input_required import InputRequiredResult
    from ..models import ToolCall
    from ..primitives.tool import Tool
    from ..server import Server
    from ..session import ServerSession


class TaskHooks(Protocol):
    def wanted(self, ctx: ServerContext, tool: Tool) -> bool:
        """Whether this call becomes a task (-32021 for a task-only tool the request cannot hold)."""
        ...

    async def start(self, ctx: ServerContext, call: ToolCall, transport: StreamableHTTPTransport | None,
                    runtime: Runtime | None, tool: Tool, arguments: dict) -> dict:
        """Queue (or start here) the recorded call: the result that hands the client its task."""
        ...

    def session(self, server: Server, envelope: Envelope) -> ServerSession:
        """The session a task's tool sees where it runs (a worker): the creating request's envelope."""
        ...

    async def fulfil(self, ctx: ServerContext, value: InputRequiredResult) -> dict[str, Any] | None:
        """The answers to a running task's ``input_required`` result, brought by ``tasks/update``."""
        ...

    async def changed(self, call_id: str, transport: StreamableHTTPTransport | None) -> None:
        """Tell whoever listens that the task's status changed (never raises)."""
        ...


def task_hooks() -> TaskHooks | None:
    return ports.implementation(TaskHooks)


def wanted_as_task(ctx: ServerContext, tool: Tool) -> bool:
    """Whether this call becomes a task; a task-only tool refused (-32021) when it cannot be one."""
    hooks = task_hooks()
    if hooks is not None:
        return hooks.wanted(ctx, tool)
    if tool.task_only:
        raise MissingRequiredClientCapabilityError(("extensions", methods.TASKS_EXTENSION))
    return False
