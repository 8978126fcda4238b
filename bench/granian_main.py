"""granian's command line (``python -m granian``) with its worker started by ``spawn``, a fresh
interpreter, instead of ``fork``.

Under valgrind a forked worker runs under callgrind but cannot be controlled (it has no gdbserver
of its own: ``callgrind_control`` does not see it); a spawned one is a new program that valgrind
follows (``--trace-children=yes``) like any other, so counting switches on and dumps in the process
that serves. Serving is the same either way: the worker builds the application itself and runs
granian's Rust server on its asyncio loop.

    python bench/granian_main.py --interface asgi --workers 1 floor_app:application
"""

from __future__ import annotations

import multiprocessing

from granian.cli import cli

if __name__ == "__main__":
    multiprocessing.set_start_method("spawn")
    cli()
