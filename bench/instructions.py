"""Instructions per ``tools/call`` (or per whole session), counted by valgrind's callgrind in the
server process.

Unlike CPU time, the count does not depend on what else the machine does, so two versions of the
code (``--checkout`` another worktree, with its own ``.venv``) or two settings (``--env``) can be
compared on a busy machine, a few hundred calls each. Only the server process is counted, from
after a warm-up to the last call; Python's hash seed is fixed. Work paced by the clock (a recheck
once a second, heartbeats) runs about 50 times as often per call under valgrind as at full speed,
so it weighs more here than it does in production. The driver is ``bench/counting.py``.

    bench/instructions.py --mode stateful --calls 300
    bench/instructions.py --mode stateless --env MCP_REGISTRY_IN_DATABASE=0
    bench/instructions.py --checkout ../old-worktree
    bench/instructions.py --mode modern --concurrency 16              # the 2026-07-28 lifecycle
    bench/instructions.py --mode modern --concurrency 16 --reference  # the official SDK's server
    bench/instructions.py --mode stateful --reference                 # the SDK's sessions + SSE
    bench/instructions.py --mode sessions --calls 32                  # per whole session
    bench/instructions.py --mode sessions --reference --calls 32
    bench/instructions.py --mode sessions --env DATABASE_URL=sqlite:////tmp/x.sqlite3 --env REDIS_URL=
    bench/instructions.py --floor --asgi-server uvicorn --concurrency 16   # the bare ASGI floor
    bench/instructions.py --mode modern --concurrency 16 --asgi-server granian

Modes: ``stateless`` (our stateless configuration, JSON responses; the SDK's stateless mode),
``stateful`` (sessions, SSE responses; one session per connection, opened before counting),
``modern`` (2026-07-28 requests, no session, to the stateful configuration; the SDK's stateless
server) and ``sessions`` (initialize, notifications/initialized, one call, DELETE, counted per
session; ``--calls`` is then the number of sessions). ``--floor`` counts a bare ASGI application
answering JSON (``bench/floor_app.py``) under ``--asgi-server`` instead: what the HTTP exchange
costs by itself, so ours minus floor is our own share.

Ours needs PostgreSQL (a database ``--database``, ``mcp_instructions`` unless told, is made anew)
and Redis (the database of ``--redis-url`` is flushed), unless ``--env`` sets ``DATABASE_URL`` and
``REDIS_URL`` (empty: the embedded default, in-memory state).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import counting

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "mcp_instructions"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=counting.KINDS, default="stateful",
                        help="modern: 2026-07-28 requests (no session) to the stateful configuration; "
                             "sessions: whole sessions, counted per session")
    parser.add_argument("--calls", type=int, default=300, help="calls (sessions in --mode sessions)")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="connections sending calls at once (the calls are split evenly)")
    parser.add_argument("--asgi-server", choices=counting.ASGI_SERVERS, default="daphne",
                        help="what serves our application or the floor (uvicorn, granian: the bench "
                             "extra; granian's one worker process is the one counted)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--reference", action="store_true",
                       help="count the official SDK's server of bench/run instead (bench extra)")
    which.add_argument("--floor", action="store_true",
                       help="count a bare ASGI application answering JSON instead (bench/floor_app.py)")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="a checkout with its own .venv")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="copy callgrind's output files there (callgrind_annotate reads them)")
    parser.add_argument("--postgres-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", default=DATABASE,
                        help="the PostgreSQL database made anew for our server (mcp_instructions)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("bench/instructions.py needs valgrind (apt-get install valgrind)", file=sys.stderr)
        return 2
    if args.calls % args.concurrency:
        parser.error("--calls must be a multiple of --concurrency")
    if (args.reference or args.floor) and args.env:
        parser.error("--env sets our server's environment: not with --reference or --floor")
    if args.reference and args.asgi_server != "daphne":
        parser.error("--asgi-server is for ours or the floor: the SDK's server runs uvicorn itself")
    env = dict(item.split("=", 1) for item in args.env)
    checkout = args.checkout.resolve()
    python = str(checkout / ".venv" / "bin" / "python")
    if args.reference:
        spec = counting.reference(python, stateful=args.mode in ("stateful", "sessions"))
        server = "the official SDK"
    elif args.floor:
        spec = counting.floor(python, args.asgi_server)
        server = f"a bare ASGI application under {args.asgi_server}"
    else:
        spec = counting.ours(checkout, stateless=args.mode == "stateless", env=env,
                             postgres=args.postgres_url, redis=args.redis_url,
                             database=args.database, asgi_server=args.asgi_server)
        server = f"{args.checkout} under {args.asgi_server}, {env or 'default settings'}"
    phase = counting.Phase(args.mode, args.concurrency, args.calls)
    total = counting.measure(spec, [phase], args.keep)[0]
    unit = "sessions" if args.mode == "sessions" else "calls"
    what = "whole sessions" if args.mode == "sessions" else f"{args.mode} tools/call"
    print(f"{what}, c={args.concurrency}, {server}: "
          f"{total:,} instructions for {args.calls} {unit}, {total / args.calls:,.0f} per {unit[:-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
