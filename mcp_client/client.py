"""``Client``: the same API as :class:`AsyncClient`, for code that is not async.

It runs an ``AsyncClient`` on an event loop of its own, in a background thread; each method
blocks until the answer comes. Handlers (``on_elicitation`` ...) may be plain functions. Every
method is written out, with the signature of its ``AsyncClient`` twin, so that type checkers and
IDEs see them (tests/test_client_typed.py keeps the two in step).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from mcp_protocol.cancellation import Cancellation

from .async_client import AsyncClient
from .input_required import DEFAULT_MAX_ROUNDS
from .skills import Skill
from .subscriptions import DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES
from .types import CallToolResult, DiscoverResult, Page, Prompt, Resource, ResourceTemplate, Tool

T = TypeVar("T")


class Client:
    """A blocking MCP client of the server ``transport`` names: an ``http(s)://`` URL, a stdio
    server's command line, or a transport (``StdioTransport``, ``HTTPTransport`` or your own).

        with Client("http://127.0.0.1:8000/mcp", mode="legacy") as client:
            print(client.call_tool("add", {"a": 2, "b": 3}).text)

    ``mode`` is how ``connect()`` (and so ``with``) connects when it is not given one.
    """

    def __init__(self, transport: Any, *, mode: str | None = None, max_pages: int = 1000,
                 client_info: dict | None = None,
                 input_required_max_rounds: int = DEFAULT_MAX_ROUNDS,
                 listen_max_retries: int = DEFAULT_MAX_RETRIES,
                 listen_max_backoff: float = DEFAULT_MAX_BACKOFF, telemetry: bool | None = None):
        # First: bad options start no thread.
        self._async = AsyncClient(transport, mode=mode, max_pages=max_pages, client_info=client_info,
                                  input_required_max_rounds=input_required_max_rounds,
                                  listen_max_retries=listen_max_retries,
                                  listen_max_backoff=listen_max_backoff, telemetry=telemetry)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._thread.start()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if not self._thread.is_alive():
            coroutine.close()
            raise RuntimeError("this client was shut down")
        if threading.current_thread() is self._thread:
            # A notification callback runs on the client's loop: waiting there would wait forever.
            coroutine.close()
            raise RuntimeError("a notification callback cannot make a blocking call on its own client; "
                               "use a server-request handler (run on a worker thread) or another thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _on_loop(self, register: Callable[[], T]) -> T:
        """Run ``register`` on the client's loop: registering a handler or a callback may open
        the listening stream, which lives there."""

        async def run() -> T:
            return register()

        return self._run(run())

    def shutdown(self) -> None:
        """Close the connection and stop the client's thread."""
        if self._thread.is_alive():
            try:
                self._run(self._async.close())
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(5)
                if not self._thread.is_alive():
                    self._loop.close()

    def __enter__(self) -> Client:
        try:
            self.connect()
        except BaseException:
            self.shutdown()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"<Client {self._async.transport!r}>"

    # What the connection is ---------------------------------------------------------------------
    @property
    def transport(self) -> Any:
        return self._async.transport

    @property
    def mode(self) -> str | None:
        """How ``connect()`` connects when it is not given a mode (None: ``"auto"``)."""
        return self._async.mode

    @property
    def max_pages(self) -> int:
        return self._async.max_pages

    @property
    def client_info(self) -> dict:
        return self._async.client_info

    @property
    def input_required_max_rounds(self) -> int:
        return self._async.input_required_max_rounds

    @property
    def server_info(self) -> dict | None:
        """The ``initialize`` result, or the ``server/discover`` result in its shape."""
        return self._async.server_info

    @property
    def connected(self) -> bool:
        return self._async.connected

    @property
    def protocol_version(self) -> str | None:
        return self._async.protocol_version

    @property
    def server_capabilities(self) -> dict:
        return self._async.server_capabilities

    @property
    def instructions(self) -> str | None:
        return self._async.instructions

    @property
    def server_implementation(self) -> dict | None:
        return self._async.server_implementation

    @property
    def is_modern(self) -> bool:
        """Whether the connection speaks the 2026-07-28 lifecycle (no handshake, no session)."""
        return self._async.is_modern

    @property
    def listening(self) -> dict | None:
        """In the 2026-07-28 era, the notifications the server agreed to send on the open listen
        stream (its acknowledged filter); None when no listen stream is open, and in the
        handshake era."""
        return self._async.listening

    @property
    def discover_timeout(self) -> float:
        """How long ``connect(mode="auto")`` waits for a ``server/discover`` answer (5 s)."""
        return self._async.discover_timeout

    @discover_timeout.setter
    def discover_timeout(self, seconds: float) -> None:
        self._async.discover_timeout = seconds

    # Connection ---------------------------------------------------------------------------------
    def connect(self, *, capabilities: dict | None = None, protocol_version: str | None = None,
                mode: str | None = None, client_info: dict | None = None) -> dict:
        """Connect; a second call returns the first result, or raises ``AlreadyConnectedError``
        when it asks for another connection than the first made. ``mode`` is ``"auto"``,
        ``"modern"`` or ``"legacy"`` (see ``AsyncClient.connect``); a pinned ``protocol_version``
        picks its era. Returns the ``initialize`` result, or the discover result in its shape."""
        return self._run(self._async.connect(capabilities=capabilities, protocol_version=protocol_version,
                                             mode=mode, client_info=client_info))

    def close(self) -> None:
        """Close the transport (the thread stays: a later ``connect()`` starts over)."""
        self._run(self._async.close())

    # Handlers for what the server sends ---------------------------------------------------------
    def on_elicitation(self, handler: Callable) -> Callable:
        """``handler(params) -> {"action", "content"?}`` answers ``elicitation/create``."""
        return self._on_loop(lambda: self._async.on_elicitation(handler))

    def on_sampling(self, handler: Callable) -> Callable:
        """``handler(params) -> {"role", "content", "model", "stopReason"}``; raise
        ``ServerRequestError(code=-1)`` to reject."""
        return self._on_loop(lambda: self._async.on_sampling(handler))

    def on_roots(self, handler: Callable) -> Callable:
        """``handler(params) -> {"roots": [...]}`` answers ``roots/list``."""
        return self._on_loop(lambda: self._async.on_roots(handler))

    def on_server_request(self, method: str, handler: Callable) -> Callable:
        """``handler(params) -> result`` answers the server's requests named ``method``."""
        return self._on_loop(lambda: self._async.on_server_request(method, handler))

    def on_notification(self, method: str, callback: Callable) -> Callable:
        """``callback(params)`` for every notification named ``method`` (``"*"``: the whole
        message, for all)."""
        return self._on_loop(lambda: self._async.on_notification(method, callback))

    def on_progress(self, callback: Callable) -> Callable:
        """``callback(params)`` for every ``notifications/progress``."""
        return self._on_loop(lambda: self._async.on_progress(callback))

    def on_log_message(self, callback: Callable) -> Callable:
        """``callback({"level", "data", "logger"?})`` for the server's log messages."""
        return self._on_loop(lambda: self._async.on_log_message(callback))

    def on_resource_updated(self, callback: Callable) -> Callable:
        """``callback({"uri"})`` when a resource subscribed to changed, in either era."""
        return self._on_loop(lambda: self._async.on_resource_updated(callback))

    def on_subscription_error(self, callback: Callable) -> Callable:
        """``callback(error)`` (a ``ListenError``) when the 2026-07-28 listen stream could not
        be kept open."""
        return self._on_loop(lambda: self._async.on_subscription_error(callback))

    def on_list_changed(self, callback: Callable) -> Callable:
        """``callback(kind)`` with ``"tools"``, ``"prompts"`` or ``"resources"`` when the server
        says that list changed, in either era."""
        return self._on_loop(lambda: self._async.on_list_changed(callback))

    # Requests -----------------------------------------------------------------------------------
    def ping(self, *, meta: dict | None = None, cancellation: Cancellation | None = None) -> dict:
        return self._run(self._async.ping(meta=meta, cancellation=cancellation))

    def discover(self, *, meta: dict | None = None,
                 cancellation: Cancellation | None = None) -> DiscoverResult:
        """``server/discover``: the server's revisions, capabilities and identity."""
        return self._run(self._async.discover(meta=meta, cancellation=cancellation))

    def list_tools(self, cursor: str | None = None, *, meta: dict | None = None,
                   cancellation: Cancellation | None = None) -> Page:
        """One page of tools."""
        return self._run(self._async.list_tools(cursor, meta=meta, cancellation=cancellation))

    def tools(self, *, meta: dict | None = None, cancellation: Cancellation | None = None) -> list[Tool]:
        """Every tool, following ``nextCursor`` to the end."""
        return self._run(self._async.tools(meta=meta, cancellation=cancellation))

    def call_tool(self, name: str | None = None, arguments: dict | None = None, *,
                  tool: Tool | None = None, progress_token: Any = None,
                  on_progress: Callable | None = None, meta: dict | None = None,
                  cancellation: Cancellation | None = None, input_responses: dict | None = None,
                  request_state: str | None = None, on_task_status: Callable | None = None) -> CallToolResult:
        """Call a tool by ``name`` (or ``tool=``); ``on_progress(params)`` gets its progress and
        ``on_task_status(task)`` a task's status changes. ``input_responses`` and
        ``request_state`` answer an ``InputRequiredError`` by hand."""
        return self._run(self._async.call_tool(name, arguments, tool=tool, progress_token=progress_token,
                                               on_progress=on_progress, meta=meta,
                                               cancellation=cancellation, input_responses=input_responses,
                                               request_state=request_state, on_task_status=on_task_status))

    def list_resources(self, cursor: str | None = None, *, meta: dict | None = None,
                       cancellation: Cancellation | None = None) -> Page:
        return self._run(self._async.list_resources(cursor, meta=meta, cancellation=cancellation))

    def resources(self, *, meta: dict | None = None,
                  cancellation: Cancellation | None = None) -> list[Resource]:
        return self._run(self._async.resources(meta=meta, cancellation=cancellation))

    def list_resource_templates(self, cursor: str | None = None, *, meta: dict | None = None,
                                cancellation: Cancellation | None = None) -> Page:
        return self._run(self._async.list_resource_templates(cursor, meta=meta, cancellation=cancellation))

    def resource_templates(self, *, meta: dict | None = None,
                           cancellation: Cancellation | None = None) -> list[ResourceTemplate]:
        return self._run(self._async.resource_templates(meta=meta, cancellation=cancellation))

    def read_resource(self, uri: str, *, meta: dict | None = None, cancellation: Cancellation | None = None,
                      input_responses: dict | None = None, request_state: str | None = None) -> list[dict]:
        """The ``contents`` of a resource (an empty list when the server sends none)."""
        return self._run(self._async.read_resource(uri, meta=meta, cancellation=cancellation,
                                                   input_responses=input_responses,
                                                   request_state=request_state))

    def subscribe_resource(self, uri: str, *, meta: dict | None = None,
                           cancellation: Cancellation | None = None) -> dict:
        """Hear of changes to ``uri`` (``on_resource_updated``): ``resources/subscribe`` in the
        handshake era, the listen stream's filter in the 2026-07-28 era."""
        return self._run(self._async.subscribe_resource(uri, meta=meta, cancellation=cancellation))

    def unsubscribe_resource(self, uri: str, *, meta: dict | None = None,
                             cancellation: Cancellation | None = None) -> dict:
        return self._run(self._async.unsubscribe_resource(uri, meta=meta, cancellation=cancellation))

    def list_prompts(self, cursor: str | None = None, *, meta: dict | None = None,
                     cancellation: Cancellation | None = None) -> Page:
        return self._run(self._async.list_prompts(cursor, meta=meta, cancellation=cancellation))

    def prompts(self, *, meta: dict | None = None, cancellation: Cancellation | None = None) -> list[Prompt]:
        return self._run(self._async.prompts(meta=meta, cancellation=cancellation))

    # Skills (SEP-2640): see AsyncClient.
    def list_skills(self, cursor: str | None = None, *, meta: dict | None = None,
                    cancellation: Cancellation | None = None) -> Page:
        return self._run(self._async.list_skills(cursor, meta=meta, cancellation=cancellation))

    def skills(self, *, meta: dict | None = None, cancellation: Cancellation | None = None) -> list[Skill]:
        return self._run(self._async.skills(meta=meta, cancellation=cancellation))

    def get_skill(self, uri: str, *, meta: dict | None = None,
                  cancellation: Cancellation | None = None) -> Skill:
        return self._run(self._async.get_skill(uri, meta=meta, cancellation=cancellation))

    def read_skill(self, skill: str | Skill, *, meta: dict | None = None,
                   cancellation: Cancellation | None = None) -> dict[str, bytes]:
        """Every file of the skill by URI, checked against its manifest's digests and sizes."""
        return self._run(self._async.read_skill(skill, meta=meta, cancellation=cancellation))

    def read_directory(self, uri: str, cursor: str | None = None, *, meta: dict | None = None,
                       cancellation: Cancellation | None = None) -> Page:
        return self._run(self._async.read_directory(uri, cursor, meta=meta, cancellation=cancellation))

    def get_prompt(self, name: str, arguments: dict | None = None, *, meta: dict | None = None,
                   cancellation: Cancellation | None = None, input_responses: dict | None = None,
                   request_state: str | None = None) -> dict:
        return self._run(self._async.get_prompt(name, arguments, meta=meta, cancellation=cancellation,
                                                input_responses=input_responses, request_state=request_state))

    def complete(self, ref: dict, argument: dict, *, context: dict | None = None,
                 meta: dict | None = None, cancellation: Cancellation | None = None) -> dict:
        """``{"values", "total"?, "hasMore"?}`` for an argument of a prompt or resource template."""
        return self._run(self._async.complete(ref, argument, context=context, meta=meta,
                                              cancellation=cancellation))

    def set_logging_level(self, level: str, *, meta: dict | None = None,
                          cancellation: Cancellation | None = None) -> dict:
        """``logging/setLevel``: the server's log messages from ``level`` up reach ``on_log_message``."""
        return self._run(self._async.set_logging_level(level, meta=meta, cancellation=cancellation))

    def notify_roots_list_changed(self) -> None:
        self._run(self._async.notify_roots_list_changed())
