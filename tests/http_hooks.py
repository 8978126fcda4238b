"""What the HTTP tests plug into the daphne processes they start, by dotted path in ``MCP_SERVER``.

- ``SERVER_CLASS = "tests.http_hooks.HooksServer"``: the demo server plus tools that make the
  server send what the tests look for (list-changed broadcasts, resource updates, a request to the
  client tied to no request, progress that records whether it was delivered).
- ``SESSION_REQUEST_VALIDATOR = "tests.http_hooks.validate"``: refuses a request carrying
  ``x-test-validator: deny`` and raises on ``x-test-validator: explode``.
- ``EXCEPTION_REPORTER = "tests.http_hooks.report"``: appends each report, as a JSON line, to the
  file named by ``MCP_TEST_REPORTS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from typing import Any

from mcp_server import Server, ServerContext

from .waiting import PATIENCE

# Progress tool -> what each report_progress call returned, by the key the test chose.
DELIVERIES: dict[str, list[bool]] = {}


class HooksServer(Server):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        server = self

        @server.tool
        def broadcast_list_changed(kind: str = "tools") -> str:
            """``server.notify_<kind>_list_changed()`` (tools, prompts or resources)."""
            sent = getattr(server, f"notify_{kind}_list_changed")()
            return f"sent={sent}"

        @server.tool
        async def resource_updated(uri: str, server_context: ServerContext, scope: str = "server") -> str:
            """``notifications/resources/updated``: to subscribers (``server``) or this session."""
            if scope == "server":
                sent = server.notify_resources_updated(uri)
            else:
                sent = await server_context.notify_resources_updated(uri)
            return f"sent={sent}"

        @server.tool
        async def finish_elicitation(elicitation_id: str, server_context: ServerContext) -> str:
            """``notifications/elicitation/complete`` to this session."""
            sent = await server_context.notify_elicitation_complete(elicitation_id)
            return f"sent={sent}"

        @server.tool
        async def roots_without_request(server_context: ServerContext) -> str:
            """``roots/list`` through the session, tied to no request (deprecated by SEP-2260)."""
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = await server_context.session.list_roots(timeout=PATIENCE)
            warned = any(issubclass(w.category, DeprecationWarning) for w in caught)
            return json.dumps({"warned": warned, "result": result})

        @server.tool
        async def progress_recorded(key: str, steps: int, server_context: ServerContext,
                                    delay: float = 0.2) -> str:
            """Report progress ``steps`` times, ``delay`` apart, recording what each call returned."""
            DELIVERIES[key] = []
            for step in range(1, steps + 1):
                await asyncio.sleep(delay)
                DELIVERIES[key].append(await server_context.report_progress(step, total=steps))
            return "done"

        @server.tool
        def whoami(server_context: ServerContext) -> str:
            """The client identity the request's session holds, as JSON."""
            return json.dumps({"client_info": server_context.client_info,
                               "protocol_version": server_context.protocol_version})

        @server.tool
        async def progress_then_product(value: float, factor: float, server_context: ServerContext) -> dict:
            """Report progress once, then return ``value * factor`` (which may overflow to infinity)."""
            await server_context.report_progress(1, total=1)
            return {"product": value * factor}

        @server.tool
        def deliveries(key: str) -> str:
            """What ``progress_recorded(key)`` recorded so far, as JSON."""
            return json.dumps(DELIVERIES.get(key))


def validate(request: Any, session_id: str) -> bool:
    verdict = request.header("x-test-validator")
    if verdict == "explode":
        raise RuntimeError("the validator exploded")
    return verdict != "deny"


def report(exc: BaseException, context: dict) -> None:
    path = os.environ.get("MCP_TEST_REPORTS")
    if not path:
        return
    with open(path, "a") as reports:
        reports.write(json.dumps({"error": f"{type(exc).__name__}: {exc}",
                                  "context": {k: str(v) for k, v in context.items()}}) + "\n")
