"""Server-Sent Events framing."""

from __future__ import annotations


def event(data: str, *, event_id: str | None = None, event_type: str | None = None,
          retry_ms: int | None = None) -> bytes:
    if event_type is None and retry_ms is None and "\n" not in data:
        # The usual event (one line of JSON, an id): framed in one step.
        if event_id is None:
            return f"data: {data}\n\n".encode()
        return f"id: {event_id}\ndata: {data}\n\n".encode()
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event_type is not None:
        lines.append(f"event: {event_type}")
    if retry_ms is not None:
        lines.append(f"retry: {retry_ms}")
    lines.extend(f"data: {line}" for line in data.split("\n"))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def comment(text: str) -> bytes:
    return f": {text}\n\n".encode()
