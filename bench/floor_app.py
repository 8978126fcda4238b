"""The floor of the instruction counts: a bare ASGI application answering JSON, no MCP in it.

Served by daphne, uvicorn or granian exactly as our application is (``bench/counting.py`` starts it), it
measures what the ASGI server and the HTTP exchange cost by themselves, so that a count of ours
can be split into the server's share and our own (ours minus floor). It reads the whole body, parses
it and answers JSON as a JSON-RPC server would, and takes part in the four requests of a session
(a session id header on every answer, 202 for a notification, 200 for DELETE), so the same
drivers run against it unchanged. It checks nothing and keeps nothing.

Under daphne it spares what our application's hooks spare Twisted: the form parsing of POST bodies
(``skip_daphne_form_parsing``), and what ``mcp_server.http.daphne_costs`` spares (reads through a
deprecation proxy, access-log lines for a discarded log, idle timers made anew for each request).
The floor is the ASGI server as we run it, so that what is left above it is the application's.
(Without the form switch the floor under daphne is about 0.4 M instructions higher per request.)

    daphne -b 127.0.0.1 -p 8000 floor_app:application     # from bench/
"""

from __future__ import annotations

import json
from typing import Any

from mcp_server.http.daphne import skip_daphne_form_parsing
from mcp_server.http.daphne_costs import (
    keep_daphne_idle_timers,
    read_twisted_web_directly,
    skip_discarded_twisted_access_lines,
)

SESSION = b"floor-session"
# daphne has imported its protocol module before it loads this one.
skip_daphne_form_parsing()
read_twisted_web_directly()
skip_discarded_twisted_access_lines()
keep_daphne_idle_timers()


async def application(scope: dict, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":  # uvicorn without --lifespan off
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    status, payload = 200, b""
    if scope["method"] == "POST":
        message = json.loads(body)
        if "id" not in message:
            status = 202
        else:
            arguments = message.get("params", {}).get("arguments", {})
            result = {"content": [{"type": "text", "text": arguments.get("message", "")}]}
            payload = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
               (b"mcp-session-id", SESSION)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
