"""What the Streamable HTTP transport keeps in the database, so that any process can serve it."""

from __future__ import annotations

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
    created_at = models.DateTimeField(auto_now_add=True)
    last_activity = models.DateTimeField(db_index=True)

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


class StreamEvent(models.Model):
    """An SSE event, stored before it is sent so a client can resume after it (Last-Event-ID).

    ``stream`` is ``"get"`` for the session's listening stream, ``"post:<request id>"`` for the
    stream of one POST, or ``"broadcast"`` (no session) for notifications to every session.
    """

    id = models.BigAutoField(primary_key=True)
    session = models.ForeignKey(Session, null=True, on_delete=models.CASCADE, related_name="+")
    stream = models.CharField(max_length=200)
    message = models.JSONField()
    level = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [models.Index(fields=["session", "stream", "id"], name="mcp_event_stream")]
