"""``Server``: the registry of tools, prompts and resources, and the entry point for messages."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync

from mcp_protocol import jsonrpc, methods

from . import dispatch, logging_levels, request_state
from .capabilities import Capabilities, normalize
from .configuration import Configuration, ConfigurationError, global_configuration
from .deprecations import deprecated_feature
from .errors import MethodAlreadyDefinedError
from .handlers import method_entry
from .handlers.cache_hints import check as check_cache_hints
from .handlers.pagination import check_page_size
from .hook_calls import call_hook, fire_hook
from .invoke import call_with_params
from .middleware.base import build_chain
from .middleware.base import load as load_middleware
from .primitives import Prompt, Resource, ResourceTemplate, Tool
from .primitives.base import check_icons
from .primitives.prompt import prompt_from_function
from .primitives.tool import tool_from_function
from .registry import guard
from .request_state import RequestStateSecurity
from .session import ServerSession

logger = logging.getLogger("mcp_server")


@dataclass
class Hooks:
    """Handlers that replace or extend the built-in behaviour of some methods."""

    resources_read: Callable | None = None
    resources_list: Callable | None = None
    resources_subscribe: Callable | None = None
    resources_unsubscribe: Callable | None = None
    completion: Callable | None = None
    roots_list_changed: Callable | None = None


class Server:
    """An MCP server: what it offers, how it is configured, and how it answers messages.

    ``server.handle(message)`` and ``server.handle_json(text)`` answer one message (or batch) in
    process; transports (stdio, Streamable HTTP) call the async forms.
    """

    def __init__(
        self,
        name: str = "model_context_protocol",
        *,
        title: str | None = None,
        version: str = "0.1.0",
        description: str | None = None,
        icons: list[dict] | None = None,
        website_url: str | None = None,
        instructions: str | None = None,
        tools: Iterable[Tool | type[Tool]] = (),
        prompts: Iterable[Prompt | type[Prompt]] = (),
        resources: Iterable[Resource | type[Resource]] = (),
        resource_templates: Iterable[ResourceTemplate | type[ResourceTemplate]] = (),
        server_context: Any = None,
        configuration: Configuration | None = None,
        capabilities: Capabilities | dict | None = None,
        page_size: int | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        request_state_security: RequestStateSecurity | None = None,
        input_required_legacy_shim: bool = True,
        input_required_max_rounds: int = 8,
        middleware: Iterable[Any] = (),
    ):
        self.name = name
        self.title = title
        self.version = version
        self.description = description
        self.icons = check_icons(icons)
        self.website_url = website_url
        self.instructions = instructions
        self.server_context = server_context
        self._own_configuration = configuration or Configuration()
        self.capabilities = normalize(capabilities)
        self.page_size = check_page_size(page_size)
        check_cache_hints(ttl_ms, cache_scope)
        self.ttl_ms = ttl_ms
        self.cache_scope = cache_scope
        self.request_state_security = request_state_security
        self.input_required_legacy_shim = bool(input_required_legacy_shim)
        if isinstance(input_required_max_rounds, bool) or not isinstance(input_required_max_rounds, int) \
                or input_required_max_rounds < 1:
            raise ValueError(f"input_required_max_rounds must be a positive integer, "
                             f"not {input_required_max_rounds!r}")
        self.input_required_max_rounds = input_required_max_rounds
        self.hooks = Hooks()
        # MCP middleware (mcp_server.middleware): factories, or import strings of them, the first
        # outermost. The chain is built once, here; None (no middleware) costs a request nothing.
        self.middleware = load_middleware(middleware, "Server(middleware=...)")
        self.middleware_chain = build_chain(self.middleware)
        self.custom_methods: dict[str, Callable] = {}
        self.tools: dict[str, Tool] = {}
        self.prompts: dict[str, Prompt] = {}
        self.resources: dict[str, Resource] = {}
        self.resource_templates: dict[str, ResourceTemplate] = {}
        # The registry as administrators shape it (mcp_server.registry), on the project's default
        # server; None: the registry is what code registered, as it is.
        self.overlay: Any = None
        self._registry_changes = 0
        self._guarded: tuple[Any, bool] | None = None
        # Where server-wide notifications go: every live transport serving this server, oldest
        # first (weak references: a transport nobody serves any more is forgotten).
        self._transports: list[Callable[[], Any]] = []
        # The connection state used by handle()/handle_json() and single-session transports.
        self.session = ServerSession(self)

        self._check_version_gates_of_server()
        _reject_duplicates("tool", [_instance(t).name for t in tools])
        _reject_duplicates("prompt", [_instance(p).name for p in prompts])
        for tool in tools:
            self.add_tool(tool)
        for prompt in prompts:
            self.add_prompt(prompt)
        for resource in resources:
            self.add_resource(resource)
        for template in resource_templates:
            self.add_resource_template(template)

    # The registry a request sees ---------------------------------------------------------------
    @property
    def registry_version(self) -> tuple:
        """Changes when code registers something (or takes it out of the dicts)."""
        return (self._registry_changes, len(self.tools), len(self.prompts), len(self.resources),
                len(self.resource_templates))

    async def registry_view(self, ctx: Any) -> Any:
        """What ``ctx``'s request may see: ``.tools``, ``.prompts``, ``.resources`` and
        ``.resource_templates``; the server itself when there is no overlay and no primitive
        requires scopes or permissions (``mcp_server.registry.guard``)."""
        registry = self.registry_now()
        if registry is None:
            registry = await self.registry_for(ctx.session.user_id)
        if not self.guarded:
            return registry
        return await guard.visible(registry, ctx.session.principal, ctx.session.user_id)

    @property
    def guarded(self) -> bool:
        """Whether a primitive code registered requires scopes or permissions."""
        version = self.registry_version
        cached = self._guarded
        if cached is None or cached[0] != version:
            found = any(guard.is_guarded(primitive) for registry in (
                self.tools, self.prompts, self.resources, self.resource_templates)
                for primitive in registry.values())
            cached = self._guarded = (version, found)
        return cached[1]

    def registry_now(self) -> Any:
        """What :meth:`registry_for` gives anyone when it needs no wait; None when it must be
        awaited (a snapshot to look at or build, or one that restricts someone)."""
        if self.overlay is None:
            return self
        return self.overlay.open_view_now()

    async def registry_for(self, user_id: Any) -> Any:
        """What the Django user ``user_id`` (None: anonymous) may see; see :meth:`registry_view`."""
        if self.overlay is None:
            return self
        return await self.overlay.view_for(user_id)

    def known_tool(self, name: str) -> Any:
        """The tool a call of ``name`` reaches as this process last saw the registry (curated by
        administrators where they did), else what code registered under ``name``; None: none."""
        if self.overlay is not None:
            tool = self.overlay.known_tool(name)
            if tool is not None:
                return tool
        return self.tools.get(name)

    async def tool_named(self, name: str) -> Any:
        """The tool a call of ``name`` runs, from the current registry (curated by administrators
        where they did); None: no such tool."""
        if self.overlay is None:
            return self.tools.get(name)
        return await self.overlay.tool_named(name)

    # Configuration -------------------------------------------------------------------------
    @property
    def configuration(self) -> Configuration:
        """This server's configuration over the global one (read at each request).

        The merge is kept while neither configuration changes (nor the merged copy itself): it is
        read several times per request.
        """
        own, cached = self._own_configuration, getattr(self, "_merged_configuration", None)
        if cached is not None and cached[0] == (own.version, global_configuration.version, cached[1].version):
            return cached[1]
        merged = own.merged_over(global_configuration)
        self._merged_configuration = ((own.version, global_configuration.version, merged.version), merged)
        return merged

    @property
    def client_capabilities(self) -> dict | None:
        return self.session.client_capabilities

    @property
    def request_state_security(self) -> RequestStateSecurity | None:
        """What seals input_required request states: the one given to this server, else the one
        ``MCP_SERVER["REQUEST_STATE_KEYS"]`` describes, else None (see mcp_server.mrtr)."""
        return self._request_state_security or request_state.from_settings()

    @request_state_security.setter
    def request_state_security(self, security: RequestStateSecurity | None) -> None:
        if security is not None and not isinstance(security, RequestStateSecurity):
            raise TypeError("request_state_security must be a RequestStateSecurity or None, "
                            f"not {type(security).__name__}")
        self._request_state_security = security

    def _pin(self) -> str | None:
        return self.configuration.protocol_version

    def _check_version_gates_of_server(self) -> None:
        pin = self._pin()
        if pin is None:
            return
        if pin <= "2025-06-18" and self.description is not None:
            raise ConfigurationError(f"server description needs protocol 2025-11-25 (pinned {pin})")
        if pin <= "2025-03-26" and (self.title is not None or self.website_url is not None):
            raise ConfigurationError(f"server title and website_url need 2025-06-18 (pinned {pin})")
        if pin == "2024-11-05" and self.instructions is not None:
            raise ConfigurationError("server instructions need protocol 2025-03-26 (pinned 2024-11-05)")

    def _check_version_gates_of(self, primitive: Any) -> None:
        pin = self._pin()
        if pin is None:
            return
        label = f"{type(primitive).__name__.lstrip('_')} {primitive.name!r}"
        if pin <= "2025-03-26" and getattr(primitive, "title", None) is not None:
            raise ConfigurationError(f"{label}: title needs protocol 2025-06-18 (pinned {pin})")
        if isinstance(primitive, Tool):
            if pin <= "2025-06-18" and primitive.input_schema.uses_ref():
                raise ConfigurationError(
                    f"{label}: $ref in an input schema needs protocol 2025-11-25 (pinned {pin})"
                )
            if pin == "2024-11-05" and primitive.annotations is not None:
                raise ConfigurationError(
                    f"{label}: tool annotations need protocol 2025-03-26 (pinned 2024-11-05)"
                )

    # What the server says about itself -------------------------------------------------------
    def server_info_for(self, version: str) -> dict[str, Any]:
        info: dict[str, Any] = {"name": self.name, "version": self.version}
        if version > "2025-03-26":
            if self.title is not None:
                info["title"] = self.title
            if self.website_url is not None:
                info["websiteUrl"] = self.website_url
        if version > "2025-06-18":
            if self.description is not None:
                info["description"] = self.description
            if self.icons is not None:
                info["icons"] = self.icons
        return info

    def capabilities_for(self, version: str) -> dict[str, Any]:
        return self.capabilities

    # Registration ----------------------------------------------------------------------------
    def add_tool(self, tool: Tool | type[Tool], *, replace: bool = False) -> Tool:
        tool = _instance(tool)
        self._check_version_gates_of(tool)
        if not replace and tool.name in self.tools:
            raise ValueError(f"Duplicate tool name: {tool.name}")
        self.tools[tool.name] = tool
        self._registry_changes += 1
        return tool

    def add_prompt(self, prompt: Prompt | type[Prompt], *, replace: bool = False) -> Prompt:
        prompt = _instance(prompt)
        self._check_version_gates_of(prompt)
        if not replace and prompt.name in self.prompts:
            raise ValueError(f"Duplicate prompt name: {prompt.name}")
        self.prompts[prompt.name] = prompt
        self._registry_changes += 1
        return prompt

    def add_resource(self, resource: Resource | type[Resource]) -> Resource:
        resource = _instance(resource)
        self._check_version_gates_of(resource)
        self.resources[resource.uri] = resource
        self._registry_changes += 1
        return resource

    def add_resource_template(self, template: ResourceTemplate | type[ResourceTemplate]
                              ) -> ResourceTemplate:
        template = _instance(template)
        self._check_version_gates_of(template)
        self.resource_templates[template.uri_template] = template
        self._registry_changes += 1
        return template

    def register(self, item: Any) -> Any:
        """Add a tool, prompt, resource or template (class or instance); returns ``item``."""
        instance = _instance(item)
        adders = (
            (Tool, self.add_tool), (Prompt, self.add_prompt),
            (Resource, self.add_resource), (ResourceTemplate, self.add_resource_template),
        )
        for kind, add in adders:
            if isinstance(instance, kind):
                add(instance)
                return item
        raise TypeError(f"cannot register {item!r}: not a Tool, Prompt, Resource or template")

    def define_tool(self, handler: Callable | None = None, **fields: Any) -> Any:
        """Like :meth:`Tool.define`, and registered here; usable as a decorator."""
        return self._define(lambda fn: self.add_tool(Tool.define(fn, **fields)), handler)

    def define_prompt(self, handler: Callable | None = None, **fields: Any) -> Any:
        return self._define(lambda fn: self.add_prompt(Prompt.define(fn, **fields)), handler)

    def define_resource(self, handler: Callable | None = None, **fields: Any) -> Any:
        return self._define(lambda fn: self.add_resource(Resource.define(fn, **fields)), handler)

    def define_resource_template(self, handler: Callable | None = None, **fields: Any) -> Any:
        return self._define(
            lambda fn: self.add_resource_template(ResourceTemplate.define(fn, **fields)), handler
        )

    def tool(self, function: Callable | None = None, **fields: Any) -> Any:
        """Decorator: a function with typed keyword arguments becomes a tool."""
        return self._decorate(lambda fn: self.add_tool(tool_from_function(fn, **fields)), function)

    def prompt(self, function: Callable | None = None, **fields: Any) -> Any:
        """Decorator: a function with keyword arguments becomes a prompt."""
        return self._decorate(
            lambda fn: self.add_prompt(prompt_from_function(fn, **fields)), function
        )

    def resource(self, uri: str, **fields: Any) -> Callable:
        """Decorator: ``@server.resource("file:///x", name="x")`` serves the function's return."""
        fields.setdefault("name", None)

        def decorate(function: Callable) -> Callable:
            name = fields.pop("name") or function.__name__
            self.add_resource(Resource.define(function, uri=uri, name=name, **fields))
            return function

        return decorate

    def resource_template(self, uri_template: str, **fields: Any) -> Callable:
        """Decorator: ``@server.resource_template("users://{id}")`` gets ``id`` as a keyword."""
        fields.setdefault("name", None)

        def decorate(function: Callable) -> Callable:
            name = fields.pop("name") or function.__name__
            self.add_resource_template(
                ResourceTemplate.define(function, uri_template=uri_template, name=name, **fields)
            )
            return function

        return decorate

    @staticmethod
    def _define(register: Callable, handler: Callable | None) -> Any:
        if handler is not None:
            return register(handler)

        def decorate(function: Callable) -> Callable:
            register(function)
            return function

        return decorate

    @staticmethod
    def _decorate(register: Callable, function: Callable | None) -> Any:
        if function is not None:
            register(function)
            return function

        def decorate(fn: Callable) -> Callable:
            register(fn)
            return fn

        return decorate

    @property
    def serves_reads(self) -> bool:
        """Whether anything registered here answers ``resources/read`` by itself."""
        return bool(self.resource_templates) or any(r.readable for r in self.resources.values())

    # Hooks -----------------------------------------------------------------------------------
    def resources_read_handler(self, handler: Callable) -> Callable:
        """Replace ``resources/read`` routing: ``handler(params, server_context=...)``."""
        self.hooks.resources_read = handler
        return handler

    def resources_list_handler(self, handler: Callable) -> Callable:
        """Compute ``resources/list`` per request; must return a stable order (it is paginated)."""
        self.hooks.resources_list = handler
        return handler

    def resources_subscribe_handler(self, handler: Callable) -> Callable:
        self.hooks.resources_subscribe = handler
        return handler

    def resources_unsubscribe_handler(self, handler: Callable) -> Callable:
        self.hooks.resources_unsubscribe = handler
        return handler

    def completion_handler(self, handler: Callable) -> Callable:
        self.hooks.completion = handler
        return handler

    def roots_list_changed_handler(self, handler: Callable) -> Callable:
        self.hooks.roots_list_changed = handler
        return handler

    def define_custom_method(self, method_name: str, handler: Callable | None = None) -> Any:
        """Answer a method of your own: ``handler(params, server_context=...)`` returns any JSON."""
        if method_entry(method_name) is not None or method_name in self.custom_methods:
            raise MethodAlreadyDefinedError(method_name)

        def register(function: Callable) -> Callable:
            self.custom_methods[method_name] = function
            return function

        return register(handler) if handler is not None else register

    def method_handler(self, method: str) -> tuple[Callable | None, str | None]:
        entry = method_entry(method)
        if entry is not None:
            return entry
        custom = self.custom_methods.get(method)
        if custom is None:
            return None, None

        async def run_custom(ctx: Any) -> Any:
            return await call_with_params(custom, ctx.params, ctx)

        return run_custom, None

    # Handling messages -----------------------------------------------------------------------
    async def handle_async(self, payload: Any, session: ServerSession | None = None) -> Any:
        return await dispatch.handle_payload(self, payload, session or self.session)

    async def handle_incoming_async(self, incoming: jsonrpc.Incoming,
                                    session: ServerSession | None = None) -> dict | None:
        """The answer to one message a transport has classified already (no batch)."""
        return await dispatch.handle_incoming(self, incoming, session or self.session)

    async def handle_json_async(self, text: str | bytes,
                                session: ServerSession | None = None) -> str | None:
        return await dispatch.handle_json(self, text, session or self.session)

    def handle(self, payload: Any) -> Any:
        """Answer one decoded message or batch in process; None for notifications."""
        return async_to_sync(self.handle_async)(payload)

    def handle_json(self, text: str | bytes) -> str | None:
        """Answer JSON text in process; None when there is nothing to send back."""
        return async_to_sync(self.handle_json_async)(text)

    async def receive_response(self, message: dict, session: ServerSession) -> None:
        """A client's answer to a server-to-client request; unknown ids are ignored."""
        session.resolve_response(message)

    # Transports ------------------------------------------------------------------------------
    def add_transport(self, transport: Any) -> None:
        """Send server-wide notifications through ``transport`` too (each transport calls this)."""
        self._transports = [ref for ref in self._transports if ref() not in (None, transport)]
        self._transports.append(_reference(transport))

    @property
    def transports(self) -> list[Any]:
        """The live transports serving this server, oldest first."""
        return [t for t in (ref() for ref in self._transports) if t is not None]

    @property
    def transport(self) -> Any:
        """The newest transport serving this server (None before any)."""
        transports = self.transports
        return transports[-1] if transports else None

    @transport.setter
    def transport(self, transport: Any) -> None:
        """Serve server-wide notifications through ``transport`` alone (None: through none); kept
        by a strong reference, as an attribute would be."""
        self._transports = [] if transport is None else [lambda: transport]

    def _notification_routes(self) -> list[Any]:
        """One transport per set of listening streams: transports sharing a broadcast group (their
        processes' runtimes in one channel-layer group) reach the same streams through any of them."""
        seen: set[Any] = set()
        routes = []
        for transport in self.transports:
            key = getattr(transport, "broadcast_group", None) or id(transport)
            if key not in seen:
                seen.add(key)
                routes.append(transport)
        return routes

    # Server-wide notifications ---------------------------------------------------------------
    def notify_tools_list_changed(self) -> bool:
        return self._broadcast(methods.NOTIFICATIONS_TOOLS_LIST_CHANGED, "tools_list_changed")

    def notify_prompts_list_changed(self) -> bool:
        return self._broadcast(methods.NOTIFICATIONS_PROMPTS_LIST_CHANGED, "prompts_list_changed")

    def notify_resources_list_changed(self) -> bool:
        return self._broadcast(
            methods.NOTIFICATIONS_RESOURCES_LIST_CHANGED, "resources_list_changed"
        )

    def notify_resources_updated(self, uri: str) -> bool:
        """``notifications/resources/updated`` to every session subscribed to ``uri``."""
        sent = False
        for transport in self._notification_routes():
            try:
                sent = bool(transport.notify_resource_updated(uri)) or sent
            except Exception as exc:
                self.report_exception(exc, {"notification": "resources_updated"})
        return sent

    @deprecated_feature("logging", "modern (2026-07-28) requests never receive server-wide messages")
    def notify_log_message(self, data: Any, level: str = "info", logger: str | None = None) -> bool:
        """A log message to every session whose level lets it through."""
        if not logging_levels.is_level(level):
            raise ValueError(f"unknown log level {level!r}; use one of {logging_levels.LEVELS}")
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        return self._broadcast(methods.NOTIFICATIONS_MESSAGE, "log_message", params, level=level)

    def _broadcast(self, method: str, label: str, params: dict | None = None, *,
                   level: str | None = None) -> bool:
        sent = False
        for transport in self._notification_routes():
            try:
                sent = bool(transport.broadcast(jsonrpc.notification(method, params), level=level)) or sent
            except Exception as exc:
                self.report_exception(exc, {"notification": label})
        return sent

    # Observability ---------------------------------------------------------------------------
    # Both hooks may use the ORM: a plain function runs on a worker thread, never on the event
    # loop (see hook_calls). The async forms are done when they return; the plain forms, called
    # on the event loop's thread, go on in the background.
    def report_exception(self, exc: BaseException, context: dict) -> None:
        reporter = self.configuration.exception_reporter
        if reporter is None:
            logger.error("MCP %s failed", next(iter(context), "request"), exc_info=exc)
            return
        fire_hook(reporter, "exception_reporter", exc, context)

    async def report_exception_async(self, exc: BaseException, context: dict) -> None:
        reporter = self.configuration.exception_reporter
        if reporter is None:
            logger.error("MCP %s failed", next(iter(context), "request"), exc_info=exc)
            return
        await call_hook(reporter, "exception_reporter", exc, context)

    def instrument(self, data: dict) -> None:
        callback = self.configuration.instrumentation_callback
        if callback is not None:
            fire_hook(callback, "instrumentation_callback", data)

    async def instrument_async(self, data: dict) -> None:
        callback = self.configuration.instrumentation_callback
        if callback is not None:
            await call_hook(callback, "instrumentation_callback", data)

    def __repr__(self) -> str:
        return f"<Server {self.name} {self.version}>"


def _reference(transport: Any) -> Callable[[], Any]:
    """A weak reference where the object allows one (a strong one otherwise)."""
    try:
        return weakref.ref(transport)
    except TypeError:
        return lambda: transport


def _instance(item: Any) -> Any:
    return item() if isinstance(item, type) else item


def _reject_duplicates(kind: str, names: list[str]) -> None:
    seen, duplicates = set(), []
    for name in names:
        if name in seen and name not in duplicates:
            duplicates.append(name)
        seen.add(name)
    if duplicates:
        raise ValueError(f"Duplicate {kind} names: {', '.join(duplicates)}")
