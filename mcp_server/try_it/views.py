"""The Try it page of a tool, in admin: its form, and a run's events as Server-Sent Events.

The page posts the form with ``fetch()`` and reads the answer as it comes: the fields with their
errors (400) when the arguments do not fit the tool's input schema, nothing having run, else a
``text/event-stream`` of the run (``runner.run``): ``progress``, ``log`` and ``notification``
events, then ``result``, ``error`` or ``cancelled``. The view itself is a plain one (admin's
``admin_view`` wraps plain views); the stream is an async iterator, which Django serves on the
event loop under ASGI, where the server's dispatch runs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from ..site import get_server
from . import runner
from .forms import ToolForm

# Who may use Try it: whoever may change the registry's switches and overrides in admin.
PERMISSION = "mcp_server.change_primitivesetting"
PAGE_TEMPLATE = "mcp_server/try_it.html"
FIELDS_TEMPLATE = "mcp_server/try_it_fields.html"


@require_http_methods(["GET", "POST"])
def try_tool(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the tool's form. POST: its errors (400: the fields alone, which the page puts back),
    or the run of the tool as the logged-in user, streamed."""
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied
    server = get_server()
    # The tool as administrators curated it (exposed name, hidden and fixed arguments) when it is
    # served, else what code registers (a disabled one, say); the run sees what the user may see.
    tool = async_to_sync(server.tool_named)(name) or server.tools.get(name)
    if tool is None:
        raise Http404(f"No tool is registered as {name!r}")
    if request.method == "POST":
        form = ToolForm(tool, request.POST)
        if form.is_valid():
            return event_stream(runner.run(server, name, form.arguments, request.user.pk))
        return render(request, FIELDS_TEMPLATE, {"form": form}, status=400)
    context = {**admin.site.each_context(request), "title": f"Try {tool.name}", "tool": tool,
               "form": ToolForm(tool)}
    return render(request, PAGE_TEMPLATE, context)


def event_stream(events: AsyncIterator[tuple[str, Any]]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_encoded(events), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy (nginx) passes each event on as it comes
    return response


async def _encoded(events: AsyncIterator[tuple[str, Any]]) -> AsyncIterator[bytes]:
    async for kind, data in events:
        if kind == "keepalive":
            yield b": keepalive\n\n"
        else:
            yield f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n".encode()
