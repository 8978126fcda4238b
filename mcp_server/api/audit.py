"""The audit trail through the API: ``GET /api/mcp/audit/`` (paginated, newest first) and
``GET /api/mcp/audit/<id>/``, read-only, for users holding ``mcp_server.view_auditrecord``."""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from rest_framework import filters, serializers, viewsets
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.schemas.openapi import AutoSchema

from ..audit.export import COLUMNS
from ..models import AuditRecord
from .permissions import ModelPermissions


class AuditRecordSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditRecord
        fields = [column if column != "user_id" else "user" for column in COLUMNS]
        read_only_fields = fields


def _moment(name: str, value: str, end_of_day: bool) -> datetime:
    """An ISO 8601 date-time, or a date (its first, or last, moment in the current time zone)."""
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise serializers.ValidationError({name: [f"Not an ISO 8601 date or date-time: {value!r}."]})
        moment = datetime.combine(day, time.max if end_of_day else time.min)
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


class AuditFilter(filters.BaseFilterBackend):
    """``?user=`` (a username or a user id), ``?client=``, ``?name=``, ``?method=``, ``?outcome=``,
    ``?since=`` and ``?until=`` (ISO 8601 dates or date-times, inclusive)."""

    FIELDS = {"client": "client_id", "name": "name", "method": "method", "outcome": "outcome",
              "background_call": "background_call", "session": "session_id", "trace_id": "trace_id"}

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        params = request.query_params
        user = params.get("user")
        if user:
            queryset = queryset.filter(user_id=int(user)) if user.isdigit() \
                else queryset.filter(username=user)
        for param, field in self.FIELDS.items():
            value = params.get(param)
            if value:
                queryset = queryset.filter(**{field: value})
        outcome = params.get("outcome")
        if outcome and outcome not in AuditRecord.Outcome.values:
            known = ", ".join(AuditRecord.Outcome.values)
            raise serializers.ValidationError({"outcome": [f"Unknown outcome {outcome!r}: one of {known}."]})
        if params.get("since"):
            queryset = queryset.filter(time__gte=_moment("since", params["since"], False))
        if params.get("until"):
            queryset = queryset.filter(time__lte=_moment("until", params["until"], True))
        return queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict]:
        described = {
            "user": "A username, or a user id.", "client": "An OAuth client id.",
            "name": "A tool or prompt name, or a resource URI.",
            "method": "tools/call, prompts/get or resources/read.",
            "outcome": f"One of {', '.join(AuditRecord.Outcome.values)}.",
            "background_call": "A background call (or task) id.", "session": "A session id.",
            "trace_id": "A W3C trace id.", "since": "Rows at or after this ISO 8601 date or date-time.",
            "until": "Rows at or before this ISO 8601 date or date-time.",
        }
        return [{"name": name, "in": "query", "required": False, "description": text,
                 "schema": {"type": "string"}} for name, text in described.items()]


class AuditPagination(PageNumberPagination):
    """Paginated whatever the project's default: the trail grows without bound."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000


class AuditRecordViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit trail, newest first: one row per tools/call, prompts/get and resources/read."""

    permission_classes = [ModelPermissions]
    queryset = AuditRecord.objects.none()
    serializer_class = AuditRecordSerializer
    filter_backends = [AuditFilter]
    pagination_class = AuditPagination
    schema = AutoSchema(tags=["audit"])

    def get_queryset(self) -> Any:
        return AuditRecord.objects.order_by("-time", "-id")
