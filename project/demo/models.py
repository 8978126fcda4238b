"""The demo's one model: support tickets, which the demo exposes as tools through a Django REST
framework ViewSet, a ``ModelAdmin`` action and the read-only model query tool (docs/django_tools.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Ticket(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    title = models.CharField(max_length=200)
    # Free text written by whoever filed the ticket: untrusted when an assistant reads it.
    body = models.TextField(blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    priority = models.PositiveSmallIntegerField(default=3)  # 1 (urgent) to 5
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="demo_tickets")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.title
