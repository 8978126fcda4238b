"""Sends ``notifications/tools/list_changed`` to every session of a deployment of the demo, from a
process of its own (as a management command or an admin save in another process would), for
``bench/scale.py streams``.

    DATABASE_URL=... REDIS_URL=... python bench/notify.py

It sets Django up and notifies once (to no stream yet: its connections are then open, as in a
process that has been serving). Then, for each line on stdin, it notifies again and prints the
moment it called ``notify_tools_list_changed()`` (``time.monotonic()``, one clock for every process
of the machine), the moment the call returned and what it returned: ``SENT <start> <end> True``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


def main() -> None:
    import django

    django.setup()
    from mcp_server.site import get_server, get_transport

    get_transport()  # the server's HTTP transport: its broadcast reaches every process's streams
    server = get_server()
    server.notify_tools_list_changed()
    print("READY", flush=True)
    for _line in sys.stdin:
        started = time.monotonic()
        sent = server.notify_tools_list_changed()
        print(f"SENT {started} {time.monotonic()} {sent}", flush=True)


if __name__ == "__main__":
    main()
