"""``python -m mcp_client URL --oauth``: the authorization code flow for the person at the terminal.

The authorization URL is printed (and opened in a browser unless ``--no-browser``); the redirect
comes back to a listener on 127.0.0.1 (the port of the stored registration when it is free, else
an ephemeral one: RFC 8252 lets a loopback redirect URI use any port); the tokens and the
registration are kept in ``$XDG_CONFIG_HOME/django-mcp-sdk/oauth/`` (``~/.config`` without it),
one file per server, mode 0600, and reused by the next command, with the DPoP key tokens may be
bound to beside it.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import os
import re
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

from .oauth.errors import AuthorizationError
from .oauth.file_storage import FileTokenStorage
from .oauth.provider import Provider
from .oauth.urls import canonical_resource

CALLBACK_PATH = "/callback"
CLIENT_NAME = "django-mcp-sdk command line (python -m mcp_client)"
WAIT_FOR_PERSON = 600  # seconds the redirect back may take: a person logs in and decides


def config_directory() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "django-mcp-sdk"


def token_path(server_url: str) -> Path:
    """The file of one server: a readable name from its host and path, and a digest of its
    canonical URL so that two servers never share a file."""
    canonical = canonical_resource(server_url)
    parts = urlsplit(canonical)
    readable = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{parts.netloc}{parts.path}").strip("_")[:80]
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return config_directory() / "oauth" / f"{readable}-{digest}.json"


def dpop_key(token_file: Path) -> bytes:
    """The command's DPoP key for one server, kept beside its tokens (mode 0600) so that tokens bound
    to it stay usable by the next command; made on first use."""
    path = token_file.with_name(token_file.stem + ".dpop-key.pem")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another command made it meanwhile
        return path.read_bytes()
    with os.fdopen(descriptor, "wb") as file:
        file.write(pem)
    return pem


class RedirectListener:
    """An HTTP server on 127.0.0.1 that takes the first redirect back to ``/callback``."""

    def __init__(self, port: int = 0):
        self.received: dict[str, str] | None = None
        self._arrived = threading.Event()
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != CALLBACK_PATH or listener._arrived.is_set():
                    self.send_error(404)
                    return
                listener.received = {k: v[0] for k, v in parse_qs(parts.query).items()}
                error = listener.received.get("error")
                text = (f"Not authorized: {html.escape(error)}." if error else
                        "Authorized. You can close this tab and go back to the terminal.")
                body = f"<!doctype html><title>python -m mcp_client</title><p>{text}</p>".encode()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                listener._arrived.set()

        self._server = HTTPServer(("127.0.0.1", port), Handler)
        self.redirect_uri = f"http://127.0.0.1:{self._server.server_address[1]}{CALLBACK_PATH}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,), daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> dict[str, str]:
        if not self._arrived.wait(timeout):
            raise AuthorizationError(f"no redirect came back to {self.redirect_uri} within {timeout:g} s")
        return dict(self.received or {})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _listen(storage: FileTokenStorage) -> RedirectListener:
    """On the port of the stored registration's redirect URI when it is free (an authorization
    server that matches ports exactly still accepts it), else on an ephemeral one."""
    try:
        registered = json.loads(storage.path.read_text()).get("client_information", {}).get("redirect_uris")
        port = urlsplit(registered[0]).port if registered else None
    except (OSError, ValueError, AttributeError, TypeError, IndexError):
        port = None
    if port:
        try:
            return RedirectListener(port)
        except OSError:
            pass
    return RedirectListener()


def person_provider(server_url: str, *, open_browser: bool, err: TextIO) -> tuple[Provider, RedirectListener]:
    """The provider for ``--oauth`` and the listener its redirect comes back to (close it after)."""
    path = token_path(server_url)
    storage = FileTokenStorage(path)
    listener = _listen(storage)

    def redirect_handler(url: str) -> None:
        err.write(f"Open this URL in a browser to authorize:\n  {url}\n")
        if open_browser and not webbrowser.open(url):
            err.write("(no browser could be opened: open the URL yourself)\n")
        err.write(f"Waiting for the redirect back to {listener.redirect_uri} ...\n")
        err.flush()

    async def callback_handler() -> tuple[str | None, str | None, str | None]:
        answer = await asyncio.to_thread(listener.wait, WAIT_FOR_PERSON)
        if answer.get("error"):
            description = answer.get("error_description")
            raise AuthorizationError(f"the authorization server answered {answer['error']}"
                                     + (f": {description}" if description else ""))
        return answer.get("code"), answer.get("state"), answer.get("iss")

    provider = Provider(client_metadata={"client_name": CLIENT_NAME, "redirect_uris": [listener.redirect_uri],
                                         "grant_types": ["authorization_code", "refresh_token"]},
                        redirect_handler=redirect_handler, callback_handler=callback_handler, storage=storage,
                        dpop_key=dpop_key(path))
    return provider, listener
