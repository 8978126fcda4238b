"""One client's HTTP requests spread over several endpoints of one deployment, in turn: what a test
of "any process serves any request of any session" needs, without a load balancer in front.

    from mcp_client import AsyncClient, HTTPTransport
    from mcp_client.transports.round_robin import round_robin

    urls = ["http://127.0.0.1:8001/mcp", "http://127.0.0.1:8002/mcp"]
    client = AsyncClient(HTTPTransport(urls[0], http_client_factory=round_robin(urls)))

It plugs into ``HTTPTransport``'s ``http_client_factory``: the ``httpx.AsyncClient`` it makes
sends each request (POST, the GET of a listening stream or a resumed one, DELETE) to the next
endpoint, with that endpoint's Host header.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import httpx


class RoundRobinTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends each request to the next of ``urls`` in turn (the request's
    query string kept), through ``transport`` (by default httpx's own). ``sent`` counts the
    requests each URL was sent."""

    def __init__(self, urls: Sequence[str], transport: httpx.AsyncBaseTransport | None = None):
        if isinstance(urls, str) or not urls:
            raise ValueError("round_robin needs a list of one or more endpoint URLs")
        self.endpoints = [httpx.URL(url) for url in urls]
        for url in self.endpoints:
            if url.scheme not in ("http", "https") or not url.host:
                raise ValueError(f"not an http(s) endpoint URL: {str(url)!r}")
        self.sent: Counter[str] = Counter()
        self._turns = itertools.cycle(range(len(self.endpoints)))
        self._lock = threading.Lock()  # one client's requests may come from several threads
        self._transport = transport or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            endpoint = self.endpoints[next(self._turns)]
            self.sent[str(endpoint)] += 1
        request.url = endpoint.copy_with(query=request.url.query or None)
        request.headers["host"] = endpoint.netloc.decode("ascii")
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._transport.aclose()


def round_robin(urls: Sequence[str], **client_options: Any) -> Callable[[], httpx.AsyncClient]:
    """An ``http_client_factory`` for ``HTTPTransport`` whose clients send each request to the next
    of ``urls``. ``client_options`` go to ``httpx.AsyncClient`` (``timeout`` is 30 s unless given,
    event hooks, headers ...; redirects are never followed, as ``HTTPTransport`` requires). Each
    client made takes its own turns; the factory's ``transports`` lists their
    ``RoundRobinTransport``, for a test that counts where the requests went."""
    if "transport" in client_options:
        raise TypeError("round_robin makes the client's transport itself; wrap yours in "
                        "RoundRobinTransport(urls, transport) and pass that to httpx.AsyncClient")
    RoundRobinTransport(urls)  # bad URLs are refused here, not at connect()
    made: list[RoundRobinTransport] = []

    def factory() -> httpx.AsyncClient:
        transport = RoundRobinTransport(urls)
        made.append(transport)
        options = {"timeout": 30.0, **client_options, "follow_redirects": False}
        return httpx.AsyncClient(transport=transport, **options)

    factory.transports = made  # type: ignore[attr-defined]
    return factory
