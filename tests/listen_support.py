"""A ``subscriptions/listen`` stream (2026-07-28) read on a thread, for the tests that listen to
running daphne processes (test_listen_multiprocess.py, test_tasks_cluster.py)."""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

import httpx

from .http_harness import drop_connection, iter_events
from .modern_support import envelope, modern_headers, modern_request
from .waiting import PATIENCE
from .wire import check_client_message, check_server_message

REVISION = "2026-07-28"


class ListenStream:
    """A ``subscriptions/listen`` POST read on a thread; every message is checked against the
    2026-07-28 schema. ``messages`` is a queue of them (None at the stream's end)."""

    def __init__(self, url: str, request_id: Any, notifications: dict, *,
                 capabilities: dict | None = None, headers: dict | None = None):
        meta = envelope(capabilities, client_info={"name": "listener", "version": "1"})
        self.request = modern_request("subscriptions/listen", request_id, meta=meta,
                                      notifications=notifications)
        self._extra_headers = headers or {}
        check_client_message(self.request, REVISION)
        self.messages: queue.Queue[dict | None] = queue.Queue()
        self.status: int | None = None
        self.retry: int | None = None  # the last SSE retry hint the stream carried
        self.opened = threading.Event()
        self._http = httpx.Client(timeout=httpx.Timeout(PATIENCE, read=None))
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self._thread.start()
        assert self.opened.wait(PATIENCE), "the listen stream did not open"

    def _read(self, url: str) -> None:
        headers = {k: v for k, v in modern_headers(self.request).items() if k != "host"}
        headers.update(self._extra_headers)
        try:
            body = json.dumps(self.request)
            with self._http.stream("POST", url, headers=headers, content=body) as response:
                self._response = response
                self.status = response.status_code
                self.opened.set()
                for event in iter_events(response):
                    if event.retry is not None:
                        self.retry = event.retry
                    if event.message is not None:
                        check_server_message(event.message, REVISION)
                        self.messages.put(event.message)
        except (httpx.HTTPError, RuntimeError):
            pass
        finally:
            self.opened.set()
            self.messages.put(None)

    def next(self) -> dict:
        try:
            message = self.messages.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError(f"nothing on the listen stream within {PATIENCE}s") from None
        assert message is not None, "the listen stream ended"
        return message

    def close(self) -> None:
        """Drop the connection, as a client that goes away does."""
        drop_connection(self._response, self._http, self._thread)
