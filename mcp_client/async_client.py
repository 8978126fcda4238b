"""``AsyncClient``: the MCP client for async code; ``Client`` wraps it for everything else.

One implementation serves both: requests are matched to answers by id, requests the server sends
are answered by the handlers registered with ``on_elicitation``, ``on_sampling``, ``on_roots`` or
``on_server_request``, and notifications reach the callbacks registered with ``on_notification``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from mcp_protocol import methods, versions
from mcp_protocol.cancellation import Cancellation
from mcp_protocol.envelope import LOG_LEVEL_KEY
from mcp_protocol.json_schema import validation_errors
from mcp_protocol.log_levels import LEVELS
from mcp_protocol.param_headers import header_paths

from . import metrics, modern, tasks
from . import skills as skill_wire
from .errors import (
    AlreadyConnectedError,
    ClientError,
    NotConnectedError,
    PaginationLimitError,
    TransportError,
    ValidationError,
)
from .input_required import DEFAULT_MAX_ROUNDS, DRIVEN_METHODS, drive
from .lifecycle import AUTO_MODE, DISCOVER_TIMEOUT, LEGACY_MODE, Lifecycle, checked_mode
from .messaging import Messaging
from .ports import TaskPort, task_port
from .skills import Skill
from .subscriptions import DEFAULT_MAX_BACKOFF, DEFAULT_MAX_RETRIES, Subscriptions
from .telemetry import tracing_for
from .transports import transport_for
from .transports.base import RequestResponseTransport, accepts_keyword, adapt
from .types import CallToolResult, DiscoverResult, Page, Prompt, Resource, ResourceTemplate, Tool, cache_hints

logger = logging.getLogger("mcp_client")

# How many tools' x-mcp-header mappings are kept for Mcp-Param-* mirroring (CLI-15).
MAX_REMEMBERED_TOOLS = 1000
DEFAULT_CLIENT_INFO = {"name": "django-mcp-sdk-client", "version": "0.1.0"}


class AsyncClient(Lifecycle, Messaging):
    """An MCP client of the server ``transport`` names: an ``http(s)://`` URL (Streamable HTTP),
    a stdio server's command line (``"python manage.py mcp_stdio"``), or a transport
    (``StdioTransport``, ``HTTPTransport`` or your own). ``mode`` is how ``connect()`` connects
    when it is not given one: ``"auto"`` (the default), ``"modern"`` or ``"legacy"``."""

    def __init__(self, transport: Any, *, mode: str | None = None, max_pages: int = 1000,
                 client_info: dict | None = None,
                 input_required_max_rounds: int = DEFAULT_MAX_ROUNDS,
                 listen_max_retries: int = DEFAULT_MAX_RETRIES,
                 listen_max_backoff: float = DEFAULT_MAX_BACKOFF, telemetry: bool | None = None):
        self.mode = checked_mode(mode, None)
        # A CLIENT span per request, its context sent in _meta: on by default when
        # opentelemetry-api is installed; False imports nothing of it (mcp_client.telemetry).
        self._tracing = tracing_for(telemetry)
        if isinstance(max_pages, bool) or not isinstance(max_pages, int) or max_pages <= 0:
            raise ValueError(f"max_pages must be a positive integer, not {max_pages!r}")
        if isinstance(input_required_max_rounds, bool) or not isinstance(input_required_max_rounds, int) \
                or input_required_max_rounds < 0:
            raise ValueError("input_required_max_rounds must be a non-negative integer (0: drive by "
                             f"hand), not {input_required_max_rounds!r}")
        self.transport = transport = transport_for(transport)
        self._wire = adapt(transport)
        # What the open connection was asked for (connect()'s arguments), to refuse another.
        self._connected_with: dict[str, Any] | None = None
        # Whether the transport reports when a request's bytes are handed off (CAN-08, CAN-09).
        self._reports_sent = accepts_keyword(self._wire.send, "on_sent")
        self.max_pages = max_pages
        self.input_required_max_rounds = input_required_max_rounds
        self.client_info = client_info or DEFAULT_CLIENT_INFO
        self.server_info: dict | None = None
        # When the connection was made, for mcp.client.session.duration (None: not recorded).
        self._session_started: float | None = None
        self._pending: dict[str, asyncio.Future] = {}
        self._finished: collections.deque[str] = collections.deque(maxlen=1000)
        self._server_requests: dict[str, Callable] = {}
        self._notifications: dict[str, list[Callable]] = collections.defaultdict(list)
        self._progress: dict[Any, Callable] = {}
        self._output_schemas: dict[str, dict] = {}
        self._last_heard = time.monotonic()
        self._background: set[asyncio.Task] = set()
        # The 2026-07-28 ``_meta`` envelope every request carries; None in the handshake era.
        self._envelope: dict | None = None
        self.discover_timeout = DISCOVER_TIMEOUT
        self._probe_timed_out = False
        # What subscriptions.py and tasks.py may use of this client (ports.py): they get this, not
        # the client's private state.
        self._port = _Port(self)
        # The subscriptions/listen stream of the 2026-07-28 era (mcp_client/subscriptions.py).
        self._subscriptions = Subscriptions(self._port, max_retries=listen_max_retries,
                                            max_backoff=listen_max_backoff)

    # Connection ------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self.server_info is not None

    @property
    def protocol_version(self) -> str | None:
        return (self.server_info or {}).get("protocolVersion")

    @property
    def server_capabilities(self) -> dict:
        return (self.server_info or {}).get("capabilities") or {}

    @property
    def instructions(self) -> str | None:
        return (self.server_info or {}).get("instructions")

    @property
    def server_implementation(self) -> dict | None:
        return (self.server_info or {}).get("serverInfo")

    @property
    def is_modern(self) -> bool:
        """Whether the connection speaks the 2026-07-28 lifecycle (no handshake, no session)."""
        return self._envelope is not None

    @property
    def listening(self) -> dict | None:
        """In the 2026-07-28 era, the notifications the server agreed to send on the open listen
        stream (its acknowledged filter); None when no listen stream is open, and in the
        handshake era."""
        return self._subscriptions.listening

    async def connect(self, *, capabilities: dict | None = None, protocol_version: str | None = None,
                      mode: str | None = None, client_info: dict | None = None) -> dict:
        """Connect; a second call returns the first result, or raises ``AlreadyConnectedError``
        when it asks for another connection (another ``mode``, say) than the first made.

        ``mode="auto"`` probes ``server/discover`` (bounded by ``discover_timeout``, 5 s) and
        adopts the 2026-07-28 lifecycle when both sides speak a modern revision, else falls back
        to the ``initialize`` handshake; ``"modern"`` is discover only (an error when the server
        has no mutual modern revision); ``"legacy"`` is the handshake with no probe. Without a
        mode it is the constructor's ``mode``, else ``"auto"``. A pinned ``protocol_version`` picks its era. A
        custom transport whose ``connect`` declares no ``mode`` gets ``connect()`` and the
        handshake, and an explicit ``mode`` raises. The result is the ``initialize`` result, or
        the discover result in its shape (``protocolVersion``, ``capabilities``, ``serverInfo``,
        ``instructions``), so the readers answer the same in either era.
        """
        if mode is None:
            mode = self.mode
        if self.connected:
            self._same_connection(capabilities=capabilities, protocol_version=protocol_version, mode=mode,
                                  client_info=client_info)
            return self.server_info
        asked = {"capabilities": capabilities or {}, "protocol_version": protocol_version,
                 "mode": mode or AUTO_MODE, "client_info": client_info or self.client_info}
        mode = checked_mode(mode, protocol_version)
        # What happens: a pinned handshake revision, or a custom transport that knows no mode (and
        # so no modern era), gets the handshake; no mode on a bundled transport is auto.
        pinned_legacy = versions.is_handshake_version(protocol_version)
        effective = LEGACY_MODE if pinned_legacy else (mode or AUTO_MODE)
        if isinstance(self._wire, RequestResponseTransport):
            if mode is not None and not self._wire.connect_takes_mode:
                raise ValueError(f"mode={mode!r} needs a transport whose connect() takes mode=; "
                                 f"{type(self.transport).__name__}.connect() does not")
            await self._wire.start(self._receive, self._fail, mode=mode)
            if mode is None:
                effective = LEGACY_MODE
        else:
            await self._wire.start(self._receive, self._fail)
        declared = self._capabilities(capabilities)
        client_info = client_info or self.client_info
        try:
            result = None
            if effective != LEGACY_MODE:
                result = await self._discover(effective, protocol_version, declared, client_info)
            if result is None:
                result = await self._fall_back(protocol_version, declared, client_info)
        except BaseException:
            # Nothing half-open stays behind (a spawned process, an HTTP client): a later
            # connect() starts from scratch.
            self._envelope = None
            with contextlib.suppress(Exception):
                await self._wire.close()
            raise
        self.server_info = result
        self._connected_with = asked
        self._session_started = metrics.now() if self._tracing is not None else None
        if self._envelope is None:
            await self._notify(methods.NOTIFICATIONS_INITIALIZED)
        if self._server_requests or self._notifications:
            await self._listen()
        return result

    def _same_connection(self, **asked: Any) -> None:
        """A second ``connect()`` is harmless when it asks for nothing else than the first did
        (an argument left out asks for nothing); otherwise it would silently keep a connection
        that is not the one asked for."""
        first = self._connected_with or {}
        differ = [name for name, value in asked.items()
                  if value is not None and name in first and value != first[name]]
        if differ:
            wanted = ", ".join(f"{name}={asked[name]!r}" for name in differ)
            had = ", ".join(f"{name}={first[name]!r}" for name in differ)
            raise AlreadyConnectedError(
                f"this client is already connected with {had}; connect({wanted}) asks for another "
                "connection: close() first, or give it to the constructor (Client(server, mode=...)) "
                "so that 'with' connects that way")

    async def _listen(self) -> None:
        """Open the transport's stream for what the server sends on no request's stream:
        requests and notifications (the standalone GET stream of Streamable HTTP; stdio needs
        none). Only a client with a handler or a callback for them opens it. In the 2026-07-28
        era it is the ``subscriptions/listen`` stream of what the callbacks want."""
        if self.is_modern:
            await self._subscriptions.refresh()
            return
        listen = getattr(self._wire, "start_listening", None)
        if listen is not None:
            await listen()

    def _capabilities(self, declared: dict | None) -> dict:
        capabilities = copy.deepcopy(declared) if declared else {}
        implied = {methods.ELICITATION_CREATE: "elicitation", methods.SAMPLING_CREATE_MESSAGE: "sampling",
                   methods.ROOTS_LIST: "roots"}
        for method, name in implied.items():
            if method in self._server_requests:
                capabilities.setdefault(name, {"listChanged": True} if name == "roots" else {})
        return capabilities

    async def close(self) -> None:
        """Close the transport; a later ``connect()`` starts over. An error of the transport's
        close (a DELETE the server refused) is raised after the local state is cleared."""
        self._subscriptions.stop()
        metrics.session(self._session_started, self.transport, self.protocol_version)
        self._session_started = None
        self.server_info = None
        self._connected_with = None
        self._envelope = None
        self._output_schemas.clear()
        try:
            await self._wire.close()
        finally:
            self._fail(TransportError("the client was closed"))
            for task in list(self._background):
                task.cancel()

    async def __aenter__(self) -> AsyncClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # Handlers for what the server sends --------------------------------------------------------
    def on_elicitation(self, handler: Callable) -> Callable:
        """``handler(params) -> {"action", "content"?}`` answers ``elicitation/create``."""
        return self.on_server_request(methods.ELICITATION_CREATE, handler)

    def on_sampling(self, handler: Callable) -> Callable:
        """``handler(params) -> {"role", "content", "model", "stopReason"}``; raise
        ``ServerRequestError(code=-1)`` to reject."""
        return self.on_server_request(methods.SAMPLING_CREATE_MESSAGE, handler)

    def on_roots(self, handler: Callable) -> Callable:
        """``handler(params) -> {"roots": [...]}`` answers ``roots/list``."""
        return self.on_server_request(methods.ROOTS_LIST, handler)

    def on_server_request(self, method: str, handler: Callable) -> Callable:
        """``handler(params) -> result`` answers the server's requests named ``method`` (any
        method). Raise ``ServerRequestError(message, code)`` to answer with that error; any other
        exception answers -32603. Registered after ``connect()``, it opens the listening stream."""
        self._server_requests[method] = handler
        # A custom transport with a route of its own for server requests gets the handler too.
        route = getattr(self.transport, "on_server_request", None)
        if isinstance(self._wire, RequestResponseTransport) and callable(route):
            route(method, handler)
        self._listen_soon()
        return handler

    def on_notification(self, method: str, callback: Callable) -> Callable:
        """``callback(params)`` for every notification named ``method`` (``"*"``: the whole
        message, for all). Registered after ``connect()``, it opens the listening stream."""
        self._notifications[method].append(callback)
        self._listen_soon()
        return callback

    def _listen_soon(self) -> None:
        if self.connected:
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to open it on
                self._spawn(self._listen())

    def on_progress(self, callback: Callable) -> Callable:
        """``callback(params)`` for every ``notifications/progress`` (``call_tool(on_progress=)``
        takes the progress of one call)."""
        return self.on_notification(methods.NOTIFICATIONS_PROGRESS, callback)

    def on_log_message(self, callback: Callable) -> Callable:
        """``callback({"level", "data", "logger"?})`` for the server's log messages."""
        return self.on_notification(methods.NOTIFICATIONS_MESSAGE, callback)

    def on_resource_updated(self, callback: Callable) -> Callable:
        """``callback({"uri"})`` when a resource subscribed to changed."""
        return self.on_notification(methods.NOTIFICATIONS_RESOURCES_UPDATED, callback)

    def on_subscription_error(self, callback: Callable) -> Callable:
        """``callback(error)`` (a ``ListenError``) when the 2026-07-28 listen stream that carries
        list changes and resource updates could not be kept open: the server refused it, or it
        dropped ``listen_max_retries`` times in a row. Registering a callback or subscribing
        again opens it anew."""
        self._subscriptions.error_callbacks.append(callback)
        return callback

    def on_list_changed(self, callback: Callable) -> Callable:
        """``callback(kind)`` with ``"tools"``, ``"prompts"`` or ``"resources"`` when the server
        says that list changed."""
        for kind, method in (("tools", methods.NOTIFICATIONS_TOOLS_LIST_CHANGED),
                             ("prompts", methods.NOTIFICATIONS_PROMPTS_LIST_CHANGED),
                             ("resources", methods.NOTIFICATIONS_RESOURCES_LIST_CHANGED)):
            self.on_notification(method, lambda params, kind=kind: callback(kind))
        return callback

    # Requests --------------------------------------------------------------------------------
    async def ping(self, *, meta: dict | None = None, cancellation: Cancellation | None = None) -> dict:
        result = await self._call(methods.PING, None, meta=meta, cancellation=cancellation)
        if not isinstance(result, dict):
            raise ValidationError(f"ping result must be an object, not {result!r}")
        return result

    async def discover(self, *, meta: dict | None = None,
                       cancellation: Cancellation | None = None) -> DiscoverResult:
        """``server/discover``: the server's revisions, capabilities and identity, asked again
        (``connect`` already asked it in the 2026-07-28 era; a handshake-era server may refuse it
        with ``ServerError``)."""
        return DiscoverResult.from_wire(
            await self._call(methods.SERVER_DISCOVER, None, meta=meta, cancellation=cancellation))

    async def list_tools(self, cursor: str | None = None, *, meta: dict | None = None,
                         cancellation: Cancellation | None = None) -> Page:
        page = await self._page(methods.TOOLS_LIST, "tools", Tool.from_wire, cursor, meta, cancellation)
        if self.is_modern:
            page.items[:] = self._with_valid_param_headers(page.items)
        for tool in page.items:
            if tool.output_schema is not None:
                self._output_schemas[tool.name] = tool.output_schema
            else:
                self._output_schemas.pop(tool.name, None)
        return page

    def _with_valid_param_headers(self, tools: list[Tool]) -> list[Tool]:
        """The tools whose ``x-mcp-header`` declarations are valid; the others cannot be called
        correctly over HTTP, so they are left out with a warning (SEP-2243)."""
        known = getattr(self._wire, "tool_param_headers", None)
        kept = []
        for tool in tools:
            try:
                paths = header_paths(tool.input_schema if isinstance(tool.input_schema, dict) else {})
            except ValueError as exc:
                logger.warning("leaving out tool %r: its x-mcp-header declarations are invalid (%s)",
                               tool.name, exc)
                continue
            if known is not None:
                known.pop(tool.name, None)  # the newest listing goes last: the oldest is forgotten first
                known[tool.name] = paths
                while len(known) > MAX_REMEMBERED_TOOLS:
                    del known[next(iter(known))]
            kept.append(tool)
        return kept

    async def tools(self, *, meta: dict | None = None,
                    cancellation: Cancellation | None = None) -> list[Tool]:
        return await self._collect(self.list_tools, meta, cancellation)

    async def call_tool(self, name: str | None = None, arguments: dict | None = None, *,
                        tool: Tool | None = None, progress_token: Any = None,
                        on_progress: Callable | None = None, meta: dict | None = None,
                        cancellation: Cancellation | None = None, input_responses: dict | None = None,
                        request_state: str | None = None,
                        on_task_status: Callable | None = None) -> CallToolResult:
        """Call a tool by ``name`` (or ``tool=``); ``on_progress(params)`` gets its progress, and
        ``on_task_status(task)`` the status changes of a task the server answers with (the Tasks
        extension: its status message is its progress).

        On a 2026-07-28 connection, ``input_required`` answers are driven through the registered
        handlers; ``input_responses=`` and ``request_state=`` retry one by hand (see
        ``InputRequiredError``).

        ``structuredContent`` is checked against the tool's output schema when ``tools()`` or
        ``list_tools()`` has shown it.
        """
        name = name or (tool.name if tool is not None else None)
        if not name:
            raise ValueError("call_tool needs name= or tool=")
        if on_progress is not None and progress_token is None:
            progress_token = uuid.uuid4().hex
        meta = dict(meta or {})
        if progress_token is not None:
            meta["progressToken"] = progress_token
        params = {"name": name, "arguments": arguments or {}}
        if on_progress is not None:
            self._progress[progress_token] = on_progress
        try:
            result = await self._call(methods.TOOLS_CALL, params, meta=meta, cancellation=cancellation,
                                      input_responses=input_responses, request_state=request_state)
            if isinstance(result, dict) and result.get("resultType") == "task":
                # The Tasks extension (SEP-2663), declared in every modern envelope: driven to its end.
                result = await tasks.final_result(self, result, cancellation, on_task_status)
        finally:
            self._progress.pop(progress_token, None)
        if not isinstance(result, dict) or not isinstance(result.get("content"), list):
            raise ValidationError(f"tools/call result needs a content list: {result!r}")
        self._check_structured(name, result)
        return CallToolResult.from_wire(result)

    def _check_structured(self, name: str, result: dict) -> None:
        schema = self._output_schemas.get(name)
        if schema is None or result.get("isError"):
            return
        if "structuredContent" not in result:
            raise ValidationError(f"tool {name} has an output schema but returned no structuredContent")
        errors = validation_errors(schema, result["structuredContent"])
        if errors:
            raise ValidationError(f"structuredContent of {name} does not match its output schema: "
                                  + "; ".join(errors))

    async def list_resources(self, cursor: str | None = None, *, meta: dict | None = None,
                             cancellation: Cancellation | None = None) -> Page:
        return await self._page(methods.RESOURCES_LIST, "resources", Resource.from_wire, cursor, meta,
                                cancellation)

    async def resources(self, *, meta: dict | None = None,
                        cancellation: Cancellation | None = None) -> list[Resource]:
        return await self._collect(self.list_resources, meta, cancellation)

    async def list_resource_templates(self, cursor: str | None = None, *, meta: dict | None = None,
                                      cancellation: Cancellation | None = None) -> Page:
        return await self._page(methods.RESOURCES_TEMPLATES_LIST, "resourceTemplates",
                                ResourceTemplate.from_wire, cursor, meta, cancellation)

    async def resource_templates(self, *, meta: dict | None = None,
                                 cancellation: Cancellation | None = None) -> list[ResourceTemplate]:
        return await self._collect(self.list_resource_templates, meta, cancellation)

    async def read_resource(self, uri: str, *, meta: dict | None = None,
                            cancellation: Cancellation | None = None, input_responses: dict | None = None,
                            request_state: str | None = None) -> list[dict]:
        """The ``contents`` of a resource (an empty list when the server sends none); drives
        ``input_required`` like ``call_tool``."""
        result = await self._call(methods.RESOURCES_READ, {"uri": uri}, meta=meta, cancellation=cancellation,
                                  input_responses=input_responses, request_state=request_state)
        if not isinstance(result, dict):
            raise ValidationError(f"resources/read result must be an object: {result!r}")
        contents = result.get("contents") or []
        if not isinstance(contents, list):
            raise ValidationError(f"resources/read contents must be a list: {contents!r}")
        return contents

    async def subscribe_resource(self, uri: str, *, meta: dict | None = None,
                                 cancellation: Cancellation | None = None) -> dict:
        """``resources/subscribe``: the server then sends ``notifications/resources/updated``
        for ``uri`` (see ``on_resource_updated``). In the 2026-07-28 era the URI joins the
        listen stream's filter; this returns once the server acknowledged it (``cancellation``
        stops that wait; ``meta`` has no request of its own to ride on, and is refused)."""
        if self.is_modern:
            self._check_connected(methods.RESOURCES_SUBSCRIBE)
            return await self._subscriptions.subscribe(uri, cancellation, meta)
        return await self._call(methods.RESOURCES_SUBSCRIBE, {"uri": uri}, meta=meta,
                                cancellation=cancellation)

    async def unsubscribe_resource(self, uri: str, *, meta: dict | None = None,
                                   cancellation: Cancellation | None = None) -> dict:
        """``resources/unsubscribe``; in the 2026-07-28 era the URI leaves the listen stream's
        filter (``cancellation`` stops the wait for the narrower stream's acknowledgement)."""
        if self.is_modern:
            self._check_connected(methods.RESOURCES_UNSUBSCRIBE)
            return await self._subscriptions.unsubscribe(uri, cancellation, meta)
        return await self._call(methods.RESOURCES_UNSUBSCRIBE, {"uri": uri}, meta=meta,
                                cancellation=cancellation)

    async def list_prompts(self, cursor: str | None = None, *, meta: dict | None = None,
                           cancellation: Cancellation | None = None) -> Page:
        return await self._page(methods.PROMPTS_LIST, "prompts", Prompt.from_wire, cursor, meta,
                                cancellation)

    async def prompts(self, *, meta: dict | None = None,
                      cancellation: Cancellation | None = None) -> list[Prompt]:
        return await self._collect(self.list_prompts, meta, cancellation)

    async def get_prompt(self, name: str, arguments: dict | None = None, *, meta: dict | None = None,
                         cancellation: Cancellation | None = None, input_responses: dict | None = None,
                         request_state: str | None = None) -> dict:
        """The prompt's result dict; drives ``input_required`` like ``call_tool``."""
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = {key: str(value) for key, value in arguments.items()}
        result = await self._call(methods.PROMPTS_GET, params, meta=meta, cancellation=cancellation,
                                  input_responses=input_responses, request_state=request_state)
        if not isinstance(result, dict) or not isinstance(result.get("messages"), list):
            raise ValidationError(f"prompts/get result needs a messages list: {result!r}")
        return result

    # Skills (SEP-2640) --------------------------------------------------------------------------
    async def list_skills(self, cursor: str | None = None, *, meta: dict | None = None,
                          cancellation: Cancellation | None = None) -> Page:
        """One page of ``skills/list``: :class:`~mcp_client.skills.Skill` entries."""
        self._check_connected(methods.SKILLS_LIST)
        skill_wire.check_declared(self.server_capabilities, methods.SKILLS_LIST)
        return await self._page(methods.SKILLS_LIST, "skills", skill_wire.Skill.from_wire, cursor, meta,
                                cancellation)

    async def skills(self, *, meta: dict | None = None,
                     cancellation: Cancellation | None = None) -> list[Skill]:
        return await self._collect(self.list_skills, meta, cancellation)

    async def get_skill(self, uri: str, *, meta: dict | None = None,
                        cancellation: Cancellation | None = None) -> Skill:
        """The entry of the skill whose ``SKILL.md`` is at ``uri`` (``skills/get``)."""
        self._check_connected(methods.SKILLS_GET)
        skill_wire.check_declared(self.server_capabilities, methods.SKILLS_GET)
        result = await self._call(methods.SKILLS_GET, {"uri": uri}, meta=meta, cancellation=cancellation)
        if not isinstance(result, dict):
            raise ValidationError(f"skills/get result must be an object: {result!r}")
        return skill_wire.Skill.from_wire(result.get("skill"))

    async def read_skill(self, skill: str | Skill, *, meta: dict | None = None,
                         cancellation: Cancellation | None = None) -> dict[str, bytes]:
        """Every file of a skill (given by its entry, or by the URI of its ``SKILL.md``), by URI,
        each checked against the manifest's size and digest: a file that differs raises
        :class:`~mcp_client.errors.ValidationError`, so nothing unverified is returned."""
        entry = skill if isinstance(skill, skill_wire.Skill) else \
            await self.get_skill(skill, meta=meta, cancellation=cancellation)
        if entry.resources is None:
            raise ClientError(f"{entry.uri} has no manifest (its resources are \"dynamic\"): "
                              "read its files with read_resource")
        files: dict[str, bytes] = {}
        for file in entry.resources:
            contents = await self.read_resource(file.uri, meta=meta, cancellation=cancellation)
            files[file.uri] = skill_wire.verified(file, skill_wire.contents_bytes(contents, file.uri))
        return files

    async def read_directory(self, uri: str, cursor: str | None = None, *, meta: dict | None = None,
                             cancellation: Cancellation | None = None) -> Page:
        """One page of ``resources/directory/read``: the direct children of a skill's folder
        (folders have the MIME type ``inode/directory``)."""
        method = methods.RESOURCES_DIRECTORY_READ
        self._check_connected(method)
        skill_wire.check_declared(self.server_capabilities, method, directory_read=True)
        params: dict[str, Any] = {"uri": uri, **({"cursor": cursor} if cursor is not None else {})}
        result = await self._call(method, params, meta=meta, cancellation=cancellation)
        if not isinstance(result, dict) or not isinstance(result.get("resources"), list):
            raise ValidationError(f"{method} result needs a resources list: {result!r}")
        try:
            items = [Resource.from_wire(item) for item in result["resources"]]
        except (KeyError, TypeError) as exc:
            raise ValidationError(f"{method} returned a malformed item: {exc}") from None
        return Page(items=items, next_cursor=result.get("nextCursor"), meta=result.get("_meta"),
                    ttl_ms=result.get("ttlMs"), cache_scope=result.get("cacheScope"))

    async def complete(self, ref: dict, argument: dict, *, context: dict | None = None,
                       meta: dict | None = None, cancellation: Cancellation | None = None) -> dict:
        """``{"values", "total"?, "hasMore"?}`` for an argument of a prompt or resource template."""
        params: dict[str, Any] = {"ref": ref, "argument": argument}
        if context is not None:
            params["context"] = context
        result = await self._call(methods.COMPLETION_COMPLETE, params, meta=meta, cancellation=cancellation)
        completion = result.get("completion") if isinstance(result, dict) else None
        return completion if isinstance(completion, dict) else {"values": [], "hasMore": False}

    async def set_logging_level(self, level: str, *, meta: dict | None = None,
                                cancellation: Cancellation | None = None) -> dict:
        """``logging/setLevel``: the server's log messages from ``level`` up reach
        ``on_log_message``. The 2026-07-28 revision has no such request: there the level rides in
        the envelope of every later request (``io.modelcontextprotocol/logLevel``)."""
        if not self.is_modern:
            return await self._call(methods.LOGGING_SET_LEVEL, {"level": level}, meta=meta,
                                    cancellation=cancellation)
        if level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
        if meta is not None:
            raise ValueError("meta= rides on a request, and the 2026-07-28 revision sends none to set "
                             "the log level (it travels in every later request's envelope)")
        self._check_connected(methods.LOGGING_SET_LEVEL)
        if cancellation is not None:
            cancellation.raise_if_cancelled()
        self._envelope = {**self._envelope, LOG_LEVEL_KEY: level}
        return {}

    async def notify_roots_list_changed(self) -> None:
        await self._notify(methods.NOTIFICATIONS_ROOTS_LIST_CHANGED)

    # Pagination ------------------------------------------------------------------------------
    async def _page(self, method: str, key: str, build: Callable, cursor: str | None,
                    meta: dict | None, cancellation: Cancellation | None) -> Page:
        params = {"cursor": cursor} if cursor is not None else None
        result = await self._call(method, params, meta=meta, cancellation=cancellation)
        if not isinstance(result, dict) or not isinstance(result.get(key), list):
            raise ValidationError(f"{method} result needs a {key} list: {result!r}")
        try:
            items = [build(item) for item in result[key]]
        except (KeyError, TypeError) as exc:
            raise ValidationError(f"{method} returned a malformed item: {exc}") from None
        return Page(items=items, next_cursor=result.get("nextCursor"), meta=result.get("_meta"),
                    **cache_hints(result))

    async def _collect(self, list_page: Callable, meta: dict | None,
                       cancellation: Cancellation | None = None) -> list:
        items: list = []
        seen: set[str] = set()
        cursor = None
        for _ in range(self.max_pages):
            page = await list_page(cursor, meta=meta, cancellation=cancellation)
            items.extend(page.items)
            cursor = page.next_cursor
            if cursor is None or cursor in seen:  # a repeated cursor would loop forever
                return items
            seen.add(cursor)
        raise PaginationLimitError(f"the server still offered a new cursor after {self.max_pages} pages")

    # The wire --------------------------------------------------------------------------------
    async def _call(self, method: str, params: dict | None, *, meta: dict | None = None,
                    cancellation: Cancellation | None = None, input_responses: dict | None = None,
                    request_state: str | None = None) -> Any:
        self._check_connected(method)
        if self.is_modern and method in modern.HANDSHAKE_ONLY:
            raise ClientError(f"{method} is not part of the 2026-07-28 lifecycle this connection speaks; "
                              "connect with mode='legacy' to use it")
        if self.is_modern and method in DRIVEN_METHODS:
            # input_required answers are driven through the registered handlers (SEP-2322).
            return await drive(
                method, params, handlers=self._server_requests, max_rounds=self.input_required_max_rounds,
                input_responses=input_responses, request_state=request_state,
                send=lambda leg: self._request(method, leg, meta=meta, cancellation=cancellation))
        if input_responses is not None or request_state is not None:
            raise ValueError("input_responses and request_state answer an input_required result of "
                             "the 2026-07-28 lifecycle; this connection speaks the handshake era")
        return await self._request(method, params, meta=meta, cancellation=cancellation)

    def _check_connected(self, method: str) -> None:
        if not self.connected:
            raise NotConnectedError(f"call connect() before {method}")


class _Port:
    """The ``ports.ListenPort`` and ``ports.TaskPort`` of one ``AsyncClient``: the operations its
    listen stream and the Tasks extension functions need, on its private state, and nothing more."""

    def __init__(self, client: AsyncClient):
        self._client = client

    # ports.ListenPort
    @property
    def server_capabilities(self) -> dict:
        return self._client.server_capabilities

    def listens_to(self, method: str) -> bool:
        callbacks = self._client._notifications  # .get: the defaultdict gains no empty entries
        return bool(callbacks.get(method) or callbacks.get("*"))

    async def request(self, method: str, params: dict | None, *, request_id: str) -> Any:
        return await self._client._request(method, params, request_id=request_id)

    def end_stream(self, request_id: str) -> bool:
        end_stream = getattr(self._client._wire, "end_stream", None)
        if end_stream is None:
            return False
        end_stream(request_id)
        return True

    async def notify(self, method: str, params: dict | None = None) -> None:
        await self._client._notify(method, params)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        return self._client._spawn(coroutine)

    def fail_request(self, error: BaseException, request_id: str) -> None:
        self._client._fail(error, request_id)

    # ports.TaskPort
    async def send_request(self, method: str, params: dict | None, *,
                           cancellation: Cancellation | None = None) -> Any:
        return await self._client._call(method, params, cancellation=cancellation)

    def server_request_handler(self, method: str) -> Callable | None:
        return self._client._server_requests.get(method)


@task_port.register
def _task_port(client: AsyncClient) -> TaskPort:
    # The tasks functions are given the AsyncClient itself (their public signature): this hands
    # them its port without a public member on the client.
    return client._port
