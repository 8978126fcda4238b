"""The record of each background tool call (``mcp_server.background``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .sessions import CompactJSONEncoder


class ToolCall(models.Model):
    """One call of a background tool: what was asked, where it runs, how far it got.

    Written by the web process that received the call and by whoever runs it (a Celery worker, or
    the web process itself on the embedded default); admin and the Tasks extension read it.
    """

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        # A task waiting for the client's answers to its ``input_requests`` (Tasks extension).
        INPUT_REQUIRED = "input_required", "input required"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    # The server serving it (its transport's channel-layer group, as on Session).
    server = models.CharField(max_length=100, blank=True, default="", db_index=True)
    tool = models.CharField(max_length=255)
    arguments = models.JSONField(default=dict, encoder=CompactJSONEncoder)
    # The request's params as received (``_meta`` included: progress token, modern envelope),
    # but for its arguments, which are the field above (``records.request_params`` joins them).
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
    # Whether a user sent it: the record stays when that user is deleted (owner then None), and
    # must not then pass for a call of a caller with no user (the Tasks extension's access rule).
    owned = models.BooleanField(default=False)
    # Who sent it, as the tool sees it on ``server_context.principal``: the scopes, OAuth client,
    # expiry, subject and how it authenticated (the user is ``owner``); None when nobody did.
    principal = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    # Whom the call counts against for MAX_BACKGROUND_CALLS_PER_PRINCIPAL, as sessions count
    # (``Session.principal``): "user:<pk>", "token:<hash of client and subject>", "address:<ip>".
    principal_key = models.CharField(max_length=255, blank=True, default="")
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
    # The Tasks extension (SEP-2663): whether the client holds this call as a task (it polls
    # tasks/get instead of waiting on the request), what the tool asks the client while
    # ``input_required`` (key -> {method, params}), the answers given with tasks/update and not yet
    # read by the tool, and every key ever asked (a key is never asked twice in one task).
    task = models.BooleanField(default=False, db_index=True)
    input_requests = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    input_responses = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    asked_keys = models.JSONField(default=list, blank=True, encoder=CompactJSONEncoder)
    # The JSON-RPC response it ended with (None while it runs, and for a cancelled call).
    # The W3C trace context (traceparent, tracestate) of the span that queued the call, so that
    # the worker's span links to it (MCP_SERVER["TELEMETRY"]); None when telemetry is off.
    trace_context = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    response = models.JSONField(null=True, blank=True, encoder=CompactJSONEncoder)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "MCP tool call"
        indexes = [models.Index(fields=["session_id", "request_key"], name="mcp_call_request"),
                   models.Index(fields=["principal_key", "state"], name="mcp_call_principal")]

    def __str__(self) -> str:
        return f"{self.tool} ({self.id}, {self.state})"

    @property
    def finished(self) -> bool:
        return self.state in (self.State.COMPLETED, self.State.FAILED, self.State.CANCELLED)
