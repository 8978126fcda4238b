"""One call of a ViewSet action, in process: the DRF request it gets, and its response as a tool
result.

The request is built here, not sent over loopback HTTP, and goes through the view that
``ViewSet.as_view({method: action})`` made, so authentication (forced to the MCP principal's Django
user), permissions, throttles, filters, pagination and validation run as for an HTTP request.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.contrib.auth.models import AnonymousUser
from django.db import connections, transaction
from django.http import HttpRequest, QueryDict
from rest_framework.renderers import JSONRenderer

from mcp_protocol.content import Text

from ..primitives.tool_response import ToolResponse

# The host the view sees. A request built in process has no Host header to check against
# ALLOWED_HOSTS; links the view builds (a paginator's next page) name this host, and only their
# query string is used.
HOST = "mcp.invalid"
# The client address the view sees: the MCP request's own is not handed down this far. Not
# loopback, which a project may trust (INTERNAL_IPS, an address allowlist), but TEST-NET-1
# (RFC 5737), an address of nobody.
REMOTE_ADDR = "192.0.2.1"


class ToolRequest(HttpRequest):
    """An ``HttpRequest`` made for a tool call rather than read from a socket."""

    def __init__(self, method: str, path: str, query: list[tuple[str, str]], body: Any, user: Any,
                 remote_addr: str = REMOTE_ADDR):
        super().__init__()
        self.method = method.upper()
        self.path = self.path_info = path
        query_string = urlencode(query)
        self.GET = QueryDict(query_string)
        self.META = {"REQUEST_METHOD": self.method, "PATH_INFO": path, "QUERY_STRING": query_string,
                     "SERVER_NAME": HOST, "SERVER_PORT": "443", "REMOTE_ADDR": remote_addr,
                     "HTTP_ACCEPT": "application/json", "wsgi.url_scheme": "https"}
        data = b"" if body is None else json.dumps(body).encode()
        if data:
            self.META["CONTENT_TYPE"] = "application/json"
            self.META["CONTENT_LENGTH"] = str(len(data))
        self._stream = io.BytesIO(data)
        self._read_started = False
        self.user = user
        self._dont_enforce_csrf_checks = True  # no cookie came with it: nothing to forge

    def get_host(self) -> str:
        return HOST

    def _get_scheme(self) -> str:
        return "https"


def principal_user(principal: Any) -> Any:
    """The Django user a principal acts for; anonymous when it has none (a client acting for
    itself, or nobody authenticated)."""
    user = getattr(principal, "user", None)
    return user if user is not None else AnonymousUser()


def dispatch(view: Callable, request: ToolRequest, principal: Any, view_kwargs: dict[str, str]) -> Any:
    """Run the view as Django's handler would: authenticated as ``principal`` (``request.user``
    its Django user, ``request.auth`` the principal itself), atomic where ATOMIC_REQUESTS says.

    Without a user the view authenticates the request itself, which carries no credential: it
    is anonymous, and a permission that needs a user says that credentials were not provided."""
    if request.user.is_authenticated:
        # What rest_framework.test.force_authenticate sets, which DRF's Request reads; that module
        # would import django.test (its test client and runner) into every web process.
        request._force_auth_user, request._force_auth_token = request.user, principal
    with contextlib.ExitStack() as stack:
        # As Django's handler does (BaseHandler.make_view_atomic), for every database that asks.
        skipped = getattr(view, "_non_atomic_requests", set())
        for alias, options in connections.settings.items():
            if options.get("ATOMIC_REQUESTS") and alias not in skipped:
                stack.enter_context(transaction.atomic(using=alias))
        return view(request, **view_kwargs)


def response_data(response: Any) -> Any:
    """The response's data as JSON values (dates, decimals and lazy text as the API renders them)."""
    if hasattr(response, "data"):
        rendered = JSONRenderer().render(response.data)
    elif getattr(response, "streaming", False):
        raise ValueError("the action answered with a streaming response, which a tool cannot return")
    else:
        rendered = response.content
    if not rendered:
        return None
    try:
        return json.loads(rendered)
    except ValueError:
        return rendered.decode(errors="replace")


def next_cursor(link: Any) -> str | None:
    """The cursor of the next page: the query string of the paginator's ``next`` link (filters
    included), which the next call sends back as it is."""
    if not isinstance(link, str) or not link:
        return None
    return urlsplit(link).query or None


def success(structured: Any, *, structured_output: bool) -> ToolResponse:
    text = Text(json.dumps(structured, ensure_ascii=False))
    if structured_output or isinstance(structured, dict):
        return ToolResponse([text], structured_content=structured)
    return ToolResponse([text])


def refusal(response: Any) -> ToolResponse:
    """A tool error result for a 4xx or 5xx answer, naming what was wrong."""
    status = response.status_code
    data = response_data(response)
    if status == 400:
        text = "invalid input: " + "; ".join(field_errors(data)) if data else "invalid input"
    elif status in (401, 403):
        text = f"permission denied: {detail(data)}"
    elif status == 404:
        text = f"not found: {detail(data)}"
    elif status == 429:
        wait = response.headers.get("Retry-After")
        text = f"throttled: {detail(data)}"
        if wait is not None:
            text = f"throttled: try again in {wait} seconds ({detail(data)})"
    elif status == 405:
        text = f"method not allowed: {detail(data)}"
    else:
        text = f"refused with HTTP status {status}: {detail(data)}"
    return ToolResponse([Text(text)], error=True)


def detail(data: Any) -> str:
    if isinstance(data, dict) and "detail" in data:
        return str(data["detail"])
    if isinstance(data, (dict, list)):
        return "; ".join(field_errors(data))
    return str(data) if data is not None else "no detail given"


def field_errors(data: Any, prefix: str = "") -> list[str]:
    """``field: message`` for each message of a DRF validation error (nested fields dotted)."""
    if isinstance(data, dict):
        lines: list[str] = []
        for key, value in data.items():
            lines.extend(field_errors(value, f"{prefix}.{key}" if prefix else str(key)))
        return lines
    if isinstance(data, list):
        if all(not isinstance(item, (dict, list)) for item in data):
            return [f"{prefix}: {item}" if prefix else str(item) for item in data]
        lines = []
        for index, item in enumerate(data):
            lines.extend(field_errors(item, f"{prefix}[{index}]" if prefix else f"[{index}]"))
        return lines
    return [f"{prefix}: {data}" if prefix else str(data)]
