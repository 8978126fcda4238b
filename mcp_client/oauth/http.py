"""The OAuth flow's own HTTP requests: never follow a redirect, never read more than 4 MiB."""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import httpx

from .errors import OAuthError
from .urls import redact

MAX_BODY_BYTES = 4 * 1024 * 1024


class OAuthHTTP:
    """A thin wrapper over an ``httpx.AsyncClient`` made for the flow (or by ``http_client_factory``:
    its redirect setting does not matter, each request is sent with ``follow_redirects=False``)."""

    def __init__(self, factory: Callable[[], httpx.AsyncClient] | None = None, timeout: float = 30.0,
                 max_body_bytes: int = MAX_BODY_BYTES):
        self.factory = factory
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes

    async def request(self, method: str, url: str, *, data: Mapping[str, str] | None = None,
                      json_body: Any = None, headers: Mapping[str, str] | None = None
                      ) -> tuple[httpx.Response, bytes]:
        """Send one request; the response (not followed if a redirect) and its body, bounded."""
        client = self.factory() if self.factory else httpx.AsyncClient(timeout=self.timeout, verify=_tls())
        try:
            async with client, client.stream(method, url, data=data, json=json_body,
                                     headers={"accept": "application/json", "accept-encoding": "identity",
                                              **(headers or {})},
                                     follow_redirects=False) as response:
                body = await self._read(response, url)
        except httpx.HTTPError as exc:
            raise OAuthError(f"{method} {redact(url)} failed: {exc!r}") from exc
        return response, body

    async def _read(self, response: httpx.Response, url: str) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise OAuthError(f"the response of {redact(url)} declares {declared} bytes, more than the "
                             f"{self.max_body_bytes} an OAuth document may have; refused")
        chunks, size = [], 0
        async for chunk in response.aiter_bytes():  # decoded: the bound holds after decompression
            size += len(chunk)
            if size > self.max_body_bytes:
                raise OAuthError(f"the response of {redact(url)} exceeds {self.max_body_bytes} bytes, "
                                 "the most an OAuth document may have; refused")
            chunks.append(chunk)
        return b"".join(chunks)


@cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context for the flow's clients: loading the CA bundle costs ~30 ms each time."""
    return httpx.create_ssl_context()


def json_object(body: bytes, what: str, url: str) -> dict:
    """The body as a JSON object, or an OAuthError naming what it should have been."""
    try:
        value = json.loads(body)
    except ValueError as exc:
        raise OAuthError(f"the {what} at {redact(url)} is not JSON: {body[:120]!r}") from exc
    if not isinstance(value, dict):
        raise OAuthError(f"the {what} at {redact(url)} is not a JSON object")
    return value


def is_redirect(response: httpx.Response) -> bool:
    return 300 <= response.status_code < 400
