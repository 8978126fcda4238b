"""What the benchmarks share to set up: a fresh PostgreSQL database, a free loopback port."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit, urlunsplit


def fresh_postgres(admin_url: str, database: str) -> str:
    """A new, empty ``database`` on the server of ``admin_url`` (dropped first); returns its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {database}")
    parts = urlsplit(admin_url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, ""))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
