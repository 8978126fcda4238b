"""The audit trail (``mcp_server.audit``): one row per ``tools/call``, ``prompts/get`` and
``resources/read``, never changed once written; rows go only when retention deletes them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from .sessions import CompactJSONEncoder


class AppendOnlyError(Exception):
    """An audit row was asked to change: rows are written once, and deleted only by retention."""


class AuditRecordQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("audit rows are append-only: they cannot be updated")

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        raise AppendOnlyError("audit rows are append-only: they cannot be updated")

    update.queryset_only = True  # type: ignore[attr-defined]
    bulk_update.queryset_only = True  # type: ignore[attr-defined]


class AuditRecord(models.Model):
    """What was asked of the server, by whom, and how it ended."""

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"  # a JSON-RPC error (``error_code``)
        TOOL_ERROR = "tool_error", "tool error"  # a result with isError
        CANCELLED = "cancelled", "cancelled"
        INPUT_REQUIRED = "input_required", "input required"

    class Method(models.TextChoices):
        TOOLS_CALL = "tools/call", "tools/call"
        PROMPTS_GET = "prompts/get", "prompts/get"
        RESOURCES_READ = "resources/read", "resources/read"

    # When the request arrived.
    time = models.DateTimeField(db_index=True)
    # The Django user it acted for. No database constraint and nothing done on the user's
    # deletion: the row keeps the id, and the username as it was (a deleted user stays named).
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.DO_NOTHING,
                             db_constraint=False, related_name="mcp_audit_records")
    username = models.CharField(max_length=150, blank=True, default="")
    # The OAuth client of its bearer token, the token's subject, and the authentication class.
    client_id = models.CharField(max_length=255, blank=True, default="")
    subject = models.CharField(max_length=255, blank=True, default="")
    authentication = models.CharField(max_length=50, blank=True, default="")
    # The handshake-era session ("" for a 2026-07-28 request) and the JSON-RPC id.
    session_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    request_id = models.JSONField(null=True, blank=True)
    protocol_version = models.CharField(max_length=16, blank=True, default="")
    method = models.CharField(max_length=32, choices=Method.choices)
    # The tool or prompt name, or the resource URI.
    name = models.CharField(max_length=1000)
    # SHA-256 of the arguments before redaction (``mcp_server.redaction.digest``), and the
    # arguments as the redaction policy lets them be kept.
    arguments_digest = models.CharField(max_length=64, blank=True, default="")
    arguments = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    error_code = models.IntegerField(null=True, blank=True)
    # Seconds from the request's arrival to its answer (a background call: to its end).
    duration = models.FloatField()
    # Bytes of the result as JSON; None when there is none (an error, a cancel).
    result_size = models.PositiveIntegerField(null=True, blank=True)
    # The background call (``ToolCall.id``; a task's id, for the Tasks extension).
    background_call = models.CharField(max_length=64, blank=True, default="", db_index=True)
    task = models.BooleanField(default=False)
    # The W3C trace id of ``params._meta.traceparent`` when valid.
    trace_id = models.CharField(max_length=32, null=True, blank=True, db_index=True)

    objects = AuditRecordQuerySet.as_manager()

    class Meta:
        verbose_name = "MCP audit record"
        ordering = ["-time", "-id"]
        indexes = [
            models.Index(fields=["user", "time"], name="mcp_audit_user"),
            models.Index(fields=["client_id", "time"], name="mcp_audit_client"),
            models.Index(fields=["method", "name", "time"], name="mcp_audit_name"),
            models.Index(fields=["outcome", "time"], name="mcp_audit_outcome"),
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.name} ({self.outcome}, {self.time:%Y-%m-%d %H:%M:%S})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("audit rows are append-only: a saved row cannot be saved again")
        super().save(*args, **kwargs)
