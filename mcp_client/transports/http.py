"""Streamable HTTP on httpx: POST each message, read JSON or SSE back, resume dropped streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from mcp_protocol import jsonrpc, methods

from ..errors import (
    BadRequestError,
    ForbiddenError,
    HTTPStatusError,
    NotConnectedError,
    NotFoundError,
    SessionExpiredError,
    TransportError,
    UnauthorizedError,
    UnprocessableError,
)
from ..modern import header_value, request_headers
from .base import Deliver, Fail, OnSent
from .sse import SSEParser

try:
    import httpx
except ImportError:  # only Streamable HTTP needs it: stdio clients work without (CHTTP-13)
    httpx = None

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
DEFAULT_RETRY_MS = 1000
MIN_RETRY_MS = 100
MAX_RESUME_ATTEMPTS = 2
LISTEN_READ_TIMEOUT = 300.0
# The largest integer every JSON peer reads exactly (2^53 - 1): larger ones get no Mcp-Param header.
MAX_SAFE_INTEGER = 2**53 - 1
# How long start_listening waits for the server to answer the GET that opens the stream.
LISTEN_OPEN_WAIT = 5.0
_ABSENT = object()
STATUS_ERRORS = {400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError,
                 404: NotFoundError, 422: UnprocessableError}


class HTTPTransport:
    """``HTTPTransport(url, headers={}, max_message_bytes=4 MiB, max_reconnection_wait=300)``.

    ``http_client_factory``: a callable of no arguments returning the ``httpx.AsyncClient`` that
    sends every HTTP request of the connection (proxies, certificates, event hooks, another httpx
    transport: an ASGI app in process, a mock, or :func:`~mcp_client.transports.round_robin.round_robin`,
    which spreads the requests over several endpoints). It is called at ``connect()``, once per
    connection, and the client it returns is closed with the connection; ``timeout`` is then the
    factory's to set, and redirects must not be followed. ``oauth`` is a provider of
    :mod:`mcp_client.oauth` (``Provider``, ``ClientCredentialsProvider`` ...): it becomes the
    client's ``auth``, so a 401 runs its flow and a 403 ``insufficient_scope`` its step-up.
    """

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 max_reconnection_wait: float = 300.0, timeout: float = 30.0,
                 http_client_factory: Callable[[], httpx.AsyncClient] | None = None,
                 oauth: httpx.Auth | None = None):
        if httpx is None:
            raise ModuleNotFoundError("HTTPTransport needs the httpx package, which is missing: "
                                      "pip install httpx (stdio needs nothing more)", name="httpx")
        if isinstance(max_message_bytes, bool) or not isinstance(max_message_bytes, int) \
                or max_message_bytes <= 0:
            raise ValueError(f"max_message_bytes must be a positive integer, not {max_message_bytes!r}")
        if isinstance(max_reconnection_wait, bool) or not isinstance(max_reconnection_wait, int | float) \
                or max_reconnection_wait <= 0:
            raise ValueError(f"max_reconnection_wait must be a positive number of seconds, "
                             f"not {max_reconnection_wait!r}")
        if oauth is not None:
            if not isinstance(oauth, httpx.Auth):
                raise TypeError(f"oauth must be an OAuth provider (an httpx.Auth), "
                                f"not {type(oauth).__name__}")
            bind = getattr(oauth, "bind", None)
            if bind is not None:
                bind(url)  # https or loopback, and the URL every request is checked against
        self.oauth = oauth
        self.url = url
        self.headers = dict(headers or {})
        self.max_message_bytes = max_message_bytes
        self.max_reconnection_wait = max_reconnection_wait
        self.timeout = timeout
        self.http_client_factory = http_client_factory
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.modern_version: str | None = None
        # Tool name -> x-mcp-header name -> argument path, filled in by AsyncClient.list_tools.
        self.tool_param_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        self._http: httpx.AsyncClient | None = None
        self._deliver: Deliver | None = None
        self._fail: Fail | None = None
        self._tasks: set[asyncio.Task] = set()
        self._listening: asyncio.Task | None = None
        # The SSE stream of each request still being read, and requests whose stream was ended
        # before it opened (see end_stream).
        self._streams: dict[Any, asyncio.Task] = {}
        self._ended: set[Any] = set()

    # Lifecycle -------------------------------------------------------------------------------
    async def start(self, deliver: Deliver, fail: Fail) -> None:
        self._deliver, self._fail = deliver, fail
        if self._http is None:
            self._http = self.http_client_factory() if self.http_client_factory else \
                httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
            if self.oauth is not None:
                self._http.auth = self.oauth
                check = getattr(self.oauth, "check_request", None)
                if check is not None:  # last: it sees the URL as any customizer left it
                    self._http.event_hooks = {**self._http.event_hooks,
                                              "request": [*self._http.event_hooks["request"], check]}

    def negotiated(self, protocol_version: str) -> None:
        self.protocol_version = protocol_version

    def adopt_modern(self, version: str | None) -> None:
        """Speak the 2026-07-28 revision ``version`` (None: back to the handshake era): no
        session, and every POST carries the standard headers of its message (SEP-2243)."""
        self.modern_version = version
        self.protocol_version = version

    def param_headers(self, message: dict) -> dict[str, str]:
        """``Mcp-Param-{Name}`` for each ``tools/call`` argument whose input-schema property
        declares ``x-mcp-header``, as far as ``list_tools`` has shown the tool."""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if message.get("method") != methods.TOOLS_CALL or not isinstance(params.get("name"), str):
            return {}
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else {}
        headers = {}
        for name, path in self.tool_param_headers.get(params["name"], {}).items():
            value: Any = arguments
            for key in path:
                value = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
            if value is _ABSENT or value is None:  # an absent argument has no header
                continue
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_SAFE_INTEGER:
                continue  # not exact in a JSON number everywhere: the body alone carries it
            headers[f"mcp-param-{name}"] = header_value(value)
        return headers

    async def close(self) -> None:
        """DELETE the session (404 and 405 count as done), then forget it."""
        for task in list(self._tasks):
            task.cancel()
        self._listening = None
        self._streams.clear()
        self._ended.clear()
        try:
            if self.session_id and self._http is not None:
                try:
                    # Ending a session is not worth an authorization: with OAuth, a 401 here is
                    # its answer (mcp_client.oauth.flow.NO_RENEWAL).
                    response = await self._http.delete(self.url, headers=self._headers(),
                                                       extensions={"mcp_client.oauth.no_renewal": True})
                except httpx.HTTPError as exc:
                    raise TransportError(f"DELETE {self.url} failed: {exc}") from exc
                done = (200, 202, 204, 404, 405) if self.oauth is None else (200, 202, 204, 401, 404, 405)
                if response.status_code not in done:
                    raise self._status_error(response, response.text)
        finally:
            self.session_id = None
            self.protocol_version = None
            self.modern_version = None
            if self._http is not None:
                await self._http.aclose()
                self._http = None

    def _headers(self, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        headers = {"accept": accept, **self.headers}
        if self.session_id:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    # Sending ---------------------------------------------------------------------------------
    async def send(self, message: dict, *, on_sent: OnSent | None = None) -> None:
        if self._http is None:
            raise NotConnectedError("call connect() before sending")
        headers = {**self._headers(), "content-type": "application/json"}
        if self.modern_version is not None:
            headers.update(request_headers(message, self.modern_version))
            headers.update(self.param_headers(message))
        handed_off = False

        async def trace(event: str, info: dict) -> None:
            # httpcore says when the request body is written: a cancel may follow from then on.
            nonlocal handed_off
            if event.endswith("send_request_body.complete") and not handed_off:
                handed_off = True
                if on_sent is not None:
                    on_sent()

        # A listen stream is quiet by design: its silence is bounded like the GET stream's.
        timeout = httpx.Timeout(self.timeout, read=LISTEN_READ_TIMEOUT) \
            if message.get("method") == methods.SUBSCRIPTIONS_LISTEN else None
        request = self._http.build_request("POST", self.url, content=jsonrpc.encode(message), headers=headers,
                                           extensions={"trace": trace},
                                           **({"timeout": timeout} if timeout is not None else {}))
        try:
            try:
                response = await self._http.send(request, stream=True)
            except httpx.TimeoutException as exc:
                raise TransportError(f"POST {self.url}: no answer within {self.timeout} s ({exc!r})") from exc
            except httpx.HTTPError as exc:
                raise TransportError(f"POST {self.url} failed: {exc!r}") from exc
            if not handed_off and on_sent is not None:  # a custom httpx transport does not trace
                on_sent()
            try:
                await self._answered(message, response)
            except BaseException:
                await response.aclose()
                raise
        finally:
            # An end_stream() for this request that its answer did not use is moot now.
            self._ended.discard(message.get("id"))

    async def _answered(self, message: dict, response: httpx.Response) -> None:
        if message.get("method") == methods.INITIALIZE and response.headers.get("mcp-session-id"):
            self.session_id = response.headers["mcp-session-id"]
        is_request = "method" in message and "id" in message
        status = response.status_code
        if status == 202:
            await response.aclose()
            if is_request:  # it would never be answered
                raise TransportError(f"the server accepted the {message['method']} request with 202 "
                                     "and no answer")
            return
        if status >= 400:
            body = (await self._read_capped(response)).decode("utf-8", "replace")
            answer = _answer_to(message, body) if self.modern_version is not None else None
            if answer is not None:
                # A modern server answers a request it refuses with a status and a JSON-RPC
                # error for it: the caller gets that error, code and all.
                await self._deliver(answer)
                return
            raise self._status_error(response, body)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            request_id = message.get("id") if is_request else None
            if is_request and request_id in self._ended:
                self._ended.discard(request_id)
                await response.aclose()
                return
            task = self._spawn(self._stream(response, request_id))
            if is_request:
                self._streams[request_id] = task
                task.add_done_callback(lambda _: self._streams.pop(request_id, None))
            return
        body = await self._read_capped(response)
        if not body.strip():
            if is_request:
                raise TransportError(f"the server answered the {message['method']} request with an "
                                     f"empty {status} response")
            return
        try:
            payload = json.loads(body)
        except ValueError as exc:
            raise TransportError(f"the server sent a body that is not JSON ({kind or 'no content type'}): "
                                 f"{body[:200]!r}") from exc
        await self._deliver(payload)

    def _status_error(self, response: httpx.Response, body: str) -> HTTPStatusError:
        status = response.status_code
        detail = _error_message(body)
        if status == 404 and self.session_id:
            self.session_id = None
            return SessionExpiredError(404, "the session expired or was deleted; connect again"
                                       + (f" ({detail})" if detail else ""), body)
        cls = STATUS_ERRORS.get(status, HTTPStatusError)
        return cls(status, (response.reason_phrase or "error") + (f": {detail}" if detail else ""), body)

    async def _read_capped(self, response: httpx.Response) -> bytes:
        chunks, size = [], 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self.max_message_bytes:
                await response.aclose()
                raise TransportError(f"a response from the server exceeds max_message_bytes "
                                     f"({self.max_message_bytes})")
            chunks.append(chunk)
        return b"".join(chunks)

    # SSE streams -----------------------------------------------------------------------------
    async def _stream(self, response: httpx.Response, request_id: Any) -> None:
        """Read a POST's SSE stream; resume it with GET + Last-Event-ID if it ends too soon."""
        parser = SSEParser(self.max_message_bytes)
        deadline: float | None = None  # the reconnection budget starts when the stream first drops
        attempts = 0
        while True:
            try:
                if await self._read_events(response, parser, request_id):
                    return
            except TransportError as exc:
                self._fail(exc, request_id)
                return
            except httpx.TimeoutException:
                limit = f"{self.timeout} s" if attempts == 0 else "the rest of max_reconnection_wait"
                self._fail(TransportError(f"the server sent nothing for {limit} while answering"),
                           request_id)
                return
            except httpx.HTTPError:
                pass  # dropped: resume below
            finally:
                ended = time.monotonic()  # the server's retry: counts from here
                await response.aclose()
            if parser.last_event_id is None or attempts >= MAX_RESUME_ATTEMPTS:
                self._fail(TransportError("the server closed the response stream before answering"
                                          + (f" (after {attempts} resumptions)" if attempts else "")),
                           request_id)
                return
            attempts += 1
            if deadline is None:
                deadline = ended + self.max_reconnection_wait
            try:
                response = await self._resume(parser, deadline, ended)
            except TransportError as exc:
                self._fail(exc, request_id)
                return

    async def _read_events(self, response: httpx.Response, parser: SSEParser, request_id: Any) -> bool:
        """True once the answer to ``request_id`` went by (the stream may stay open after it: a
        resumed GET stream does); with no id, read until the stream ends."""
        async for chunk in response.aiter_bytes():
            for event in parser.feed(chunk):
                if not event.data:
                    continue  # a priming event: an id to resume from, nothing to deliver
                try:
                    message = json.loads(event.data)
                except ValueError as exc:
                    raise TransportError(f"an SSE event is not JSON: {event.data[:200]!r}") from exc
                await self._deliver(message)
                if request_id is not None and isinstance(message, dict) and "method" not in message \
                        and message.get("id") == request_id:
                    return True
        return request_id is None

    async def _resume(self, parser: SSEParser, deadline: float, ended: float) -> httpx.Response:
        """Wait the server's ``retry:`` from the end of the stream (never less), then GET with
        ``Last-Event-ID``."""
        wait = max(MIN_RETRY_MS, parser.retry_ms if parser.retry_ms is not None else DEFAULT_RETRY_MS) / 1000
        if ended + wait > deadline:
            raise TransportError(f"resuming would need {wait:.1f} s, past max_reconnection_wait")
        await asyncio.sleep(max(0.0, ended + wait - time.monotonic()))
        headers = {**self._headers("text/event-stream"), "last-event-id": parser.last_event_id}
        timeout = httpx.Timeout(self.timeout, read=max(0.1, deadline - time.monotonic()))
        request = self._http.build_request("GET", self.url, headers=headers, timeout=timeout)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise TransportError(f"resuming the stream failed: {exc}") from exc
        if response.status_code != 200:
            body = (await self._read_capped(response)).decode("utf-8", "replace")
            raise self._status_error(response, body)
        return response

    def end_stream(self, request_id: Any) -> None:
        """Stop reading the SSE stream answering ``request_id`` and close it: how a client ends a
        ``subscriptions/listen`` stream over HTTP. A stream that has not opened yet is closed as
        soon as it does."""
        task = self._streams.pop(request_id, None)
        if task is not None:
            task.cancel()
        else:
            self._ended.add(request_id)

    async def start_listening(self) -> None:
        """Open the session's GET stream in the background, for requests the server sends. It
        returns once the server has answered the GET (at most LISTEN_OPEN_WAIT seconds), so that
        what the server sends there just after the client's next request finds the stream open."""
        if self._listening is None or self._listening.done():
            opened = asyncio.Event()
            self._listening = self._spawn(self._listen(opened))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(opened.wait(), LISTEN_OPEN_WAIT)

    async def _listen(self, opened: asyncio.Event) -> None:
        parser = SSEParser(self.max_message_bytes)
        try:
            while self._http is not None and self.session_id:
                headers = self._headers("text/event-stream")
                if parser.last_event_id:
                    headers["last-event-id"] = parser.last_event_id
                timeout = httpx.Timeout(self.timeout, read=LISTEN_READ_TIMEOUT)
                try:
                    async with self._http.stream("GET", self.url, headers=headers,
                                                 timeout=timeout) as response:
                        opened.set()
                        if response.status_code != 200:
                            return  # no listening stream here (405), or one is open already (409)
                        await self._read_events(response, parser, None)
                except (httpx.HTTPError, TransportError):
                    pass
                opened.set()  # a GET that failed was answered too: nobody waits for a retry
                wait = max(MIN_RETRY_MS, parser.retry_ms if parser.retry_ms is not None else DEFAULT_RETRY_MS)
                await asyncio.sleep(wait / 1000)
        finally:
            opened.set()

    def _spawn(self, coroutine: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __repr__(self) -> str:
        return f"<HTTPTransport {self.url}>"


def _answer_to(message: dict, body: str) -> dict | None:
    """The JSON-RPC error answering ``message`` in an HTTP error body, if that is what it is."""
    if "id" not in message or "method" not in message:
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict) \
            and payload.get("id") == message["id"]:
        return payload
    return None


def _error_message(body: str) -> str:
    """The message of a JSON-RPC error in an HTTP error body, if that is what it is."""
    try:
        error = json.loads(body).get("error")
        return str(error["message"]) if isinstance(error, dict) and "message" in error else ""
    except (ValueError, AttributeError):
        return ""

