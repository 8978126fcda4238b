"""A thread-safe cancellation token, shared by the server (incoming cancels) and the client."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class CancelledError(Exception):
    """Raised at a safe point when the request being served (or made) was cancelled."""

    def __init__(self, request_id: Any = None, reason: str | None = None):
        self.request_id = request_id
        self.reason = reason
        text = "Request was cancelled"
        if reason:
            text += f": {reason}"
        super().__init__(text)


class Cancellation:
    """Flipped once, from any thread; listeners run exactly once when it is."""

    def __init__(self, request_id: Any = None):
        self.request_id = request_id
        self.reason: str | None = None
        self._cancelled = False
        self._lock = threading.Lock()
        # Made by the first wait(): most requests end without anyone waiting for a cancel.
        self._event: threading.Event | None = None
        self._listeners: list[Callable[[Cancellation], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, reason: str | None = None) -> bool:
        """Cancel; returns False when it was already cancelled."""
        with self._lock:
            if self._cancelled:
                return False
            self.reason = reason
            self._cancelled = True
            if self._event is not None:
                self._event.set()
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(self)
        return True

    def on_cancel(self, listener: Callable[[Cancellation], None]) -> Callable[[], None]:
        """Run ``listener`` when cancelled (at once if already); returns a function that unhooks it."""
        with self._lock:
            if not self._cancelled:
                self._listeners.append(listener)
                return lambda: self._remove(listener)
        listener(self)
        return lambda: None

    def _remove(self, listener: Callable[[Cancellation], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def wait(self, timeout: float | None = None) -> bool:
        with self._lock:
            if self._cancelled:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self._cancelled:
            raise CancelledError(self.request_id, self.reason)
