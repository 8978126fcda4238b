"""The reference of the benchmark: the official Python SDK (``mcp`` on PyPI) serving the demo's
``echo`` tool over Streamable HTTP under uvicorn.

    python bench/reference_server.py --port 8765 --mode stateless   # stateless_http + JSON responses
    python bench/reference_server.py --port 8765 --mode stateful    # the SDK's default: sessions, SSE
    uvicorn --app-dir bench --factory reference_server:stateful_app --workers 2 ...   # several processes

It is started by ``bench/run.py``; nothing here is tuned beyond what a user of the SDK would write.
"""

from __future__ import annotations

import argparse
import logging
import warnings

import uvicorn
from mcp.server.mcpserver import MCPServer

warnings.simplefilter("ignore")
server = MCPServer("reference-bench", version="2.3.0")


@server.tool()
def echo(message: str) -> str:
    """Echo a message back."""
    return message


def stateful_app():
    """The stateful application, for ``uvicorn --factory`` (which ``--workers`` needs)."""
    logging.getLogger("mcp").setLevel(logging.WARNING)
    return server.streamable_http_app()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", choices=("stateless", "stateful"), required=True)
    args = parser.parse_args()
    stateless = args.mode == "stateless"
    # Only warnings: a log line per request would be CPU the benchmark is not about (our daphne
    # runs with -v 0, no access log, likewise).
    logging.getLogger("mcp").setLevel(logging.WARNING)
    app = server.streamable_http_app(json_response=stateless, stateless_http=stateless)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
