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
    # Who opened it, for the limit of sessions per principal: "user:<pk>", "token:<digest>" for a
    # token with no user ("share:<group>/token:<digest>" when it is counted with a group), or
    # "address:<client address>" for an anonymous client.
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

