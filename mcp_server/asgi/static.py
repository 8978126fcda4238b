"""Static files (admin's styles and scripts, a project's own) at the ASGI layer, with WhiteNoise.

WhiteNoise serves WSGI only; its Django middleware does the work that matters here (the files
under ``STATIC_ROOT``, the finders' files when ``WHITENOISE_USE_FINDERS`` or ``DEBUG``, compressed
variants, cache headers, conditional and range requests), and this layer hands its answers to the
ASGI server, reading files on a worker thread. Every ``WHITENOISE_*`` setting applies.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from ..settings import mcp_settings

# Bytes read from a file per message: admin's largest file is a few hundred KiB.
BLOCK_BYTES = 64 * 1024


def serves_static() -> bool:
    """Whether :func:`~mcp_server.asgi.get_asgi_application` serves ``STATIC_URL``:
    ``MCP_SERVER["SERVE_STATIC"]``, or when it is None (the default), when
    ``django.contrib.staticfiles`` is installed, ``STATIC_URL`` is a path of this site (not another
    host's URL) and either ``DEBUG`` is on or ``STATIC_ROOT`` is set."""
    from django.apps import apps
    from django.conf import settings

    chosen = mcp_settings.SERVE_STATIC
    if chosen is not None:
        return bool(chosen)
    if not apps.is_installed("django.contrib.staticfiles") or not local_static_url():
        return False
    return bool(settings.DEBUG or settings.STATIC_ROOT)


def local_static_url() -> bool:
    from django.conf import settings

    url = settings.STATIC_URL or ""
    parts = urlsplit(url)
    return bool(url) and not parts.scheme and not parts.netloc


class StaticFiles:
    """``app`` with the requests under ``STATIC_URL`` answered from WhiteNoise's files; a path
    WhiteNoise does not know goes on to ``app`` (Django answers its 404)."""

    def __init__(self, app: Any):
        from django.conf import settings
        from whitenoise.middleware import WhiteNoiseMiddleware

        self.app = app
        with warnings.catch_warnings():
            if getattr(settings, "WHITENOISE_USE_FINDERS", settings.DEBUG):
                # Served from the apps' folders: no collectstatic yet is no news.
                warnings.filterwarnings("ignore", "No directory at", UserWarning)
            # The middleware is only asked for files; it never handles a request itself.
            self.files = WhiteNoiseMiddleware(get_response=app)
        self.prefix = self.files.static_prefix

    def find(self, path: str) -> Any:
        if not path.startswith(self.prefix):
            return None
        if self.files.autorefresh:
            return self.files.find_file(path)
        return self.files.files.get(path)

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]],
                       send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        if self.files.autorefresh:
            static_file = await asyncio.to_thread(self.find, path)  # the finders look on disk
        else:
            static_file = self.find(path)
        if static_file is None:
            await self.app(scope, receive, send)
            return
        await serve(static_file, scope, send)


def wsgi_headers(scope: dict) -> dict[str, str]:
    """The request's headers as WhiteNoise reads them (``HTTP_IF_NONE_MATCH``...)."""
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = "HTTP_" + name.decode("latin-1").upper().replace("-", "_")
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    return headers


async def serve(static_file: Any, scope: dict, send: Callable[[dict], Awaitable[None]]) -> None:
    response = await asyncio.to_thread(static_file.get_response, scope["method"], wsgi_headers(scope))
    headers = [(name.lower().encode("latin-1"), str(value).encode("latin-1"))
               for name, value in response.headers]
    await send({"type": "http.response.start", "status": int(response.status), "headers": headers})
    file = response.file
    if file is None:  # HEAD, 304, 405
        await send({"type": "http.response.body", "body": b""})
        return
    try:
        while True:
            block = await asyncio.to_thread(file.read, BLOCK_BYTES)
            if not block:
                break
            await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        file.close()
