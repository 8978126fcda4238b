"""What the Streamable HTTP transport keeps in the database, so that any process can serve it."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import models


class Session(models.Model):
    """One client session: what it negotiated and who owns it."""

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    protocol_version = models.CharField(max_length=16)
    client_info = models.JSONField(default=dict)
    client_capabilities = models.JSONField(default=dict)
    log_level = models.CharField(max_length=16, blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
        related_name="mcp_sessions",
    )
    origin = models.CharField(max_length=255, blank=True, default="")
    # The server that serves it (its transport's channel-layer group): servers that share one
    # database see only their own sessions and subscriptions.
    server = models.CharField(max_length=100, blank=True, default="", db_index=True)
    # Who opened it, for the limit of sessions per principal: "user:<pk>", or "address:<client
    # address>" for an anonymous client.
    principal = models.CharField(max_length=255, blank=True, default="", db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity = models.DateTimeField(db_index=True)
    # How many stored events (``StreamEvent`` rows, not dropped) the session has, and their bytes.
    stored_events = models.PositiveIntegerField(default=0)
    stored_bytes = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = "MCP session"

    def __str__(self) -> str:
        name = (self.client_info or {}).get("name", "?")
        return f"{name} ({self.id})"


class ResourceSubscription(models.Model):
    """A session's ``resources/subscribe`` to one URI."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="subscriptions")
    uri = models.CharField(max_length=2048)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "uri"], name="mcp_subscription_unique"),
        ]
        indexes = [models.Index(fields=["uri"], name="mcp_subscription_uri")]

    def __str__(self) -> str:
        return f"{self.session_id} -> {self.uri}"


class CompactJSONEncoder(json.JSONEncoder):
    """JSON as it goes on the wire: no spaces, no ``\\u`` escapes (which would store a CJK
    character in six bytes, an emoji in twelve), where the database keeps the text as written."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**{**options, "ensure_ascii": False, "separators": (",", ":")})


class StreamEvent(models.Model):
    """An SSE event, stored before it is sent so a client can resume after it (Last-Event-ID).

    ``stream`` is ``"get"`` for the session's listening stream, ``"post:<key>"`` for the stream
    of one POST, or ``"broadcast"`` (no session) for notifications to every session. A ``dropped``
    row is what is left of the newest event its stream lost to the session's limits: a resume
    from before it is refused.
    """

    id = models.BigAutoField(primary_key=True)
    session = models.ForeignKey(Session, null=True, on_delete=models.CASCADE, related_name="+")
    stream = models.CharField(max_length=200)
    message = models.JSONField(encoder=CompactJSONEncoder)
    level = models.CharField(max_length=16, blank=True, default="")
    # The bytes of the message as JSON text, counted against the session's limit.
    size = models.PositiveIntegerField(default=0)
    dropped = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["session", "stream", "id"], name="mcp_event_stream")]


class ToolCall(models.Model):
    """One call of a background tool: what was asked, where it runs, how far it got.

    Written by the web process that received the call and by whoever runs it (a Celery worker, or
    the web process itself on the embedded default); admin and the Tasks extension read it.
    """

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    # The server serving it (its transport's channel-layer group, as on Session).
    server = models.CharField(max_length=100, blank=True, default="", db_index=True)
    tool = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, encoder=CompactJSONEncoder)
    # The request's params as received (``_meta`` included: progress token, modern envelope).
    params = models.JSONField(default=dict, encoder=CompactJSONEncoder)
    # The session it belongs to ("" for a 2026-07-28 request, which has none), and the request's
    # id as sent (``request_key`` is the id as a stream key, to find the call by its request).
    session_id = models.CharField(max_length=64, blank=True, default="")
    request_id = models.JSONField(null=True)
    request_key = models.CharField(max_length=200, blank=True, default="")
    protocol_version = models.CharField(max_length=16, blank=True, default="")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="mcp_tool_calls",
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    # How its messages reach the client: "stream" (stored on the session's POST stream, resumable
    # on any process), "relay" (through the web process that holds the request) or "local".
    delivery = models.CharField(max_length=16, default="stream")
    progress = models.FloatField(null=True, blank=True)
    total = models.FloatField(null=True, blank=True)
    message = models.TextField(blank=True, default="")
    # The channel of the web process that received it, and of the process running it (its
    # heartbeat tells whether it lives), with a readable name of that process (host and pid).
    web_channel = models.CharField(max_length=200, blank=True, default="")
    runner = models.CharField(max_length=200, blank=True, default="")
    worker = models.CharField(max_length=255, blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    # Whether the tool says it is idempotent (its idempotentHint): then a call whose worker died
    # may run again, ``attempts`` counting the runs started.
    idempotent = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    # The JSON-RPC response it ended with (None while it runs, and for a cancelled call).
    response = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "MCP tool call"
        indexes = [models.Index(fields=["session_id", "request_key"], name="mcp_call_request")]

    def __str__(self) -> str:
        return f"{self.tool} ({self.id}, {self.state})"

    @property
    def finished(self) -> bool:
        return self.state in (self.State.COMPLETED, self.State.FAILED, self.State.CANCELLED)
