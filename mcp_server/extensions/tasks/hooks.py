"""How the Tasks extension attaches to what sits below it, none of which imports it: its three
methods go in the engine's method table, its ``taskIds`` into the HTTP transport's listen
filters, and its hooks into background calls (``background/task_hooks.py``). :func:`install`
registers them, called once per process by ``site.install``.

What loads the web side of background calls is imported on first use, so that installing the
extension costs a process that never serves a task (a management command) nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp_protocol import methods

from ... import ports
from ...background.task_hooks import TaskHooks
from ...handlers import register_extension_method
from . import notify
from .access import visible_task_ids

if TYPE_CHECKING:
    from mcp_protocol.envelope import Envelope

    from ...context import ServerContext
    from ...input_required import InputRequiredResult
    from ...primitives.tool import Tool
    from ...server import Server
    from ...session import ServerSession


class TaskCallHooks:
    """:class:`~mcp_server.background.task_hooks.TaskHooks`: a background call that is a task."""

    def wanted(self, ctx: ServerContext, tool: Tool) -> bool:
        from .run import wanted

        return wanted(ctx, tool)

    async def start(self, ctx: ServerContext, call: Any, transport: Any, runtime: Any, tool: Tool,
                    arguments: dict) -> dict:
        from .run import start

        return await start(ctx, call, transport, runtime, tool, arguments, self)

    def session(self, server: Server, envelope: Envelope) -> ServerSession:
        from .run import task_session

        return task_session(server, envelope)

    async def fulfil(self, ctx: ServerContext, value: InputRequiredResult) -> dict[str, Any] | None:
        from .inputs import fulfil

        return await fulfil(ctx, value)

    async def changed(self, call_id: str, transport: Any) -> None:
        await notify.publish(call_id, transport)


class TaskListenFilter:
    """:class:`~mcp_server.ports.ListenTaskFilter`: the tasks a listen stream may hear of."""

    async def visible_task_ids(self, task_ids: list[str], envelope: Envelope, principal: Any) -> list[str]:
        return await visible_task_ids(task_ids, envelope, principal)


async def get_task(ctx: ServerContext) -> dict[str, Any]:
    from .methods import get_task

    return await get_task(ctx)


async def update_task(ctx: ServerContext) -> dict[str, Any]:
    from .methods import update_task

    return await update_task(ctx)


async def cancel_task(ctx: ServerContext) -> dict[str, Any]:
    from .methods import cancel_task

    return await cancel_task(ctx)


def install(default_transport: Callable[[], Any]) -> None:
    """Attach the extension; ``default_transport()`` publishes what no HTTP request carries (a
    change made over stdio, say). Each method checks that the server and the request declare
    the extension, so it is answered on every server (-32601 where it is not declared)."""
    notify.default_transport = default_transport
    register_extension_method(methods.TASKS_GET, get_task)
    register_extension_method(methods.TASKS_UPDATE, update_task)
    register_extension_method(methods.TASKS_CANCEL, cancel_task)
    ports.register(TaskHooks, TaskCallHooks())
    ports.register(ports.ListenTaskFilter, TaskListenFilter())
