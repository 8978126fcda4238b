"""An incremental Server-Sent Events parser with a cap on the size of one event."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TransportError


@dataclass
class ServerSentEvent:
    data: str
    id: str | None = None
    event: str | None = None
    retry: int | None = None


class SSEParser:
    def __init__(self, max_event_bytes: int):
        self.max_event_bytes = max_event_bytes
        self._partial = b""
        self._data: list[str] = []
        self._id: str | None = None
        self._event: str | None = None
        self._retry: int | None = None
        self._size = 0
        # The id of the last event, kept across events as the SSE algorithm says.
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events ``chunk`` completes; raises TransportError once one event (its lines so
        far, and the line still incomplete) exceeds ``max_event_bytes``."""
        if b"\n" not in chunk:
            self._partial += chunk
            self._check(len(self._partial))
            return []
        events = []
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for raw in lines:
            self._size += len(raw) + 1
            self._check()
            event = self._line(raw.rstrip(b"\r").decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
        self._check(len(self._partial))
        return events

    def _check(self, incomplete: int = 0) -> None:
        if self._size + incomplete > self.max_event_bytes:
            raise TransportError(f"an SSE event from the server exceeds max_message_bytes "
                                 f"({self.max_event_bytes})")

    def _line(self, line: str) -> ServerSentEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "retry" and value.isdigit():
            self._retry = self.retry_ms = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if self._id is not None:
            self.last_event_id = self._id
        event = None
        if self._data or self._id is not None:
            event = ServerSentEvent("\n".join(self._data), self._id, self._event, self._retry)
        self._data, self._id, self._event, self._retry = [], None, None, None
        self._size = 0
        return event
