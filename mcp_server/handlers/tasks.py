"""``tasks/get``, ``tasks/update`` and ``tasks/cancel`` in the method table; the Tasks extension
(``mcp_server.extensions.tasks.methods``) answers them, imported when first asked."""

from __future__ import annotations

from typing import Any


async def get_task(ctx: Any) -> dict[str, Any]:
    from ..extensions.tasks.methods import get_task

    return await get_task(ctx)


async def update_task(ctx: Any) -> dict[str, Any]:
    from ..extensions.tasks.methods import update_task

    return await update_task(ctx)


async def cancel_task(ctx: Any) -> dict[str, Any]:
    from ..extensions.tasks.methods import cancel_task

    return await cancel_task(ctx)
