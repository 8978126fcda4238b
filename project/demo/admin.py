"""The demo's admin: tickets, with an action that closes the selected ones."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from .models import Ticket


@admin.register(Ticket)
class TicketAdmin(admin.ModelAdmin):
    list_display = ["title", "status", "priority", "owner", "created_at"]
    list_filter = ["status", "priority"]
    search_fields = ["title", "body"]
    actions = ["close_tickets"]

    @admin.action(description="Close the selected tickets", permissions=["change"])
    def close_tickets(self, request: HttpRequest, queryset: QuerySet[Ticket]) -> None:
        closed = queryset.exclude(status=Ticket.Status.CLOSED).update(status=Ticket.Status.CLOSED)
        self.message_user(request, f"{closed} ticket(s) closed.", messages.SUCCESS)
