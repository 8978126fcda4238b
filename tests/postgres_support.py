"""A PostgreSQL cluster of a test's own (that it may stop and start again without touching the
machine's), and a PgBouncer of a test's own in front of a PostgreSQL; both on free loopback ports.

Both refuse to run as root: as root they run as the ``postgres`` user, in a directory of theirs.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .harness import REPO
from .http_harness import free_port
from .services import reachable, require
from .waiting import PATIENCE, wait_until

POSTGRES_BIN = Path(os.environ.get("MCP_TEST_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def _as_service_user() -> tuple[list[str], int | None, int | None]:
    """The command prefix that runs a server as a user other than root, and that user's ids."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        require(False, "running as root, and no postgres user to run PostgreSQL as")
    return ["runuser", "-u", "postgres", "--"], user.pw_uid, user.pw_gid


def _private_directory(prefix: str, uid: int | None, gid: int | None) -> Path:
    # Not pytest's tmp_path: its parents are root's alone, where the service user cannot reach.
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if uid is not None:
        os.chown(path, uid, gid)
    return path


class PrivatePostgres:
    """A PostgreSQL cluster made for one test (``initdb``, trust authentication, no fsync), on a
    free port of 127.0.0.1; :meth:`stop` and :meth:`start` restart it as an operator would."""

    def __init__(self) -> None:
        require((POSTGRES_BIN / "initdb").exists(),
                f"needs PostgreSQL's server programs in {POSTGRES_BIN} (apt-get install postgresql-15; "
                "MCP_TEST_POSTGRES_BIN names another folder)")
        self.prefix, uid, gid = _as_service_user()
        self.directory = _private_directory("mcp-postgres-", uid, gid)
        self.data = self.directory / "data"
        self.port = free_port()
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")
        self.start()

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, program: str, *arguments: str) -> str:
        done = subprocess.run([*self.prefix, str(POSTGRES_BIN / program), *arguments],
                              capture_output=True, text=True, timeout=PATIENCE, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stdout}{done.stderr}"
                               f"\n{self.log}")
        return done.stdout

    @property
    def log(self) -> str:
        path = self.directory / "postgres.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> None:
        """Start the server and wait until it takes connections (``pg_ctl -w``)."""
        options = (f"-c port={self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                   f"-c full_page_writes=off -c unix_socket_directories={self.directory} "
                   "-c max_connections=100")
        self._run("pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.directory / "postgres.log"),
                  "-o", options)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` ends every connection, ``immediate`` is a crash."""
        self._run("pg_ctl", "stop", "-w", "-D", str(self.data), "-m", mode)
        assert not reachable("127.0.0.1", self.port), "PostgreSQL still takes connections"

    def create_database(self, name: str) -> None:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.stop("immediate")
        shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    try:
        yield server
    finally:
        server.close()


def migrate(database_url: str, settings: str = "tests.http_settings") -> None:
    """Create the tables of the test processes' project on ``database_url``."""
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": settings}
    done = subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=PATIENCE * 2, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


class PgBouncer:
    """PgBouncer on a free port of 127.0.0.1, in ``pool_mode`` (transaction by default), in front
    of the PostgreSQL at ``host:port``; every database of that server, as user postgres (trust)."""

    def __init__(self, host: str, port: int, pool_mode: str = "transaction") -> None:
        require(Path(PGBOUNCER).exists(), "needs PgBouncer (apt-get install pgbouncer)")
        self.prefix, uid, gid = _as_service_user()
        self.directory = _private_directory("mcp-pgbouncer-", uid, gid)
        self.port = free_port()
        (self.directory / "users.txt").write_text('"postgres" ""\n')
        config = self.directory / "pgbouncer.ini"
        config.write_text(f"""[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.directory / "users.txt"}
admin_users = postgres
pool_mode = {pool_mode}
default_pool_size = 20
max_client_conn = 500
server_reset_query =
logfile = {self.directory / "pgbouncer.log"}
pidfile = {self.directory / "pgbouncer.pid"}
""")
        for path in (config, self.directory / "users.txt"):
            if uid is not None:
                os.chown(path, uid, gid)
        # As root, PgBouncer's own -u (runuser would not pass a SIGTERM on to it).
        user = ["-u", "postgres"] if self.prefix else []
        self.process = subprocess.Popen([PGBOUNCER, *user, str(config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: self.process.poll() is not None or reachable("127.0.0.1", self.port),
                       what="PgBouncer to listen")
            assert self.process.poll() is None, f"PgBouncer exited:\n{self.log}"
        except BaseException:
            self.close()
            raise

    @property
    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def show(self, what: str) -> list[dict[str, str]]:
        """``SHOW <what>`` on PgBouncer's admin console (psql: the console takes only the simple
        query protocol), one dict a row."""
        done = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                               "-d", "pgbouncer", "-A", "-F", "\t", "-P", "footer=off", "-c", f"SHOW {what}"],
                              capture_output=True, text=True, timeout=PATIENCE, check=True)
        header, *rows = done.stdout.splitlines()
        names = header.split("\t")
        return [dict(zip(names, row.split("\t"), strict=False)) for row in rows]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(PATIENCE)
        shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def pgbouncer(host: str, port: int, pool_mode: str = "transaction") -> Iterator[PgBouncer]:
    bouncer = PgBouncer(host, port, pool_mode)
    try:
        yield bouncer
    finally:
        bouncer.close()
