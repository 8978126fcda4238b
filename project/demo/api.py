"""The demo's REST API of tickets: a ViewSet with an owner-only permission, a throttle, a FilterSet
and cursor pagination, which project/demo/mcp.py exposes as MCP tools (docs/django_tools.md)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import filters, permissions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle

from .models import Ticket


class TicketSerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True,
                                         help_text="Who filed the ticket")

    class Meta:
        model = Ticket
        fields = ["id", "title", "body", "status", "priority", "owner", "created_at"]
        read_only_fields = ["created_at"]
        extra_kwargs = {"priority": {"min_value": 1, "max_value": 5,
                                     "help_text": "1 (urgent) to 5"}}


class TicketFilter(django_filters.FilterSet):
    mine = django_filters.BooleanFilter(method="filter_mine", label="only the caller's tickets")

    class Meta:
        model = Ticket
        fields = {"status": ["exact"], "priority": ["exact", "lte", "gte"], "title": ["icontains"]}

    def filter_mine(self, queryset: QuerySet[Ticket], name: str, value: bool) -> QuerySet[Ticket]:
        user = self.request.user
        return queryset.filter(owner_id=user.pk) if value else queryset.exclude(owner_id=user.pk)


class IsOwnerOrReadOnly(permissions.BasePermission):
    """Anyone signed in reads every ticket; only its owner changes it."""

    message = "only the ticket's owner may change it"

    def has_object_permission(self, request: Request, view: object, obj: Ticket) -> bool:
        return request.method in permissions.SAFE_METHODS or obj.owner_id == request.user.pk


class TicketThrottle(UserRateThrottle):
    """Calls a user may make a minute; the tests lower it."""

    scope = "demo_tickets"
    rate = "120/minute"


class TicketPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 5


class TicketViewSet(viewsets.ModelViewSet):
    queryset = Ticket.objects.select_related("owner")
    serializer_class = TicketSerializer
    permission_classes = [permissions.IsAuthenticated, IsOwnerOrReadOnly]
    throttle_classes = [TicketThrottle]
    pagination_class = TicketPagination
    filter_backends = [DjangoFilterBackend, filters.SearchFilter, filters.OrderingFilter]
    filterset_class = TicketFilter
    search_fields = ["title", "body"]
    ordering_fields = ["created_at", "priority"]
    ordering = ("-created_at", "-id")

    def perform_create(self, serializer: TicketSerializer) -> None:
        serializer.save(owner=self.request.user)

    @action(detail=True, methods=["post"])
    def close(self, request: Request, pk: str | None = None) -> Response:
        """Close the ticket (its owner only)."""
        ticket = self.get_object()
        ticket.status = Ticket.Status.CLOSED
        ticket.save(update_fields=["status"])
        return Response(self.get_serializer(ticket).data)
