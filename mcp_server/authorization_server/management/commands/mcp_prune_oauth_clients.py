"""Delete abandoned client registrations: dynamically registered (or metadata-document) clients
older than ``ABANDONED_CLIENT_AGE`` that hold no token and no pending code, because they never got
one or all of theirs are gone. Also forgets redeemed codes with nothing left to revoke.

    python manage.py mcp_prune_oauth_clients [--age SECONDS] [--dry-run]

Run it from cron (or Celery beat) next to the toolkit's ``cleartokens``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.settings import oauth2_settings

from mcp_server.authorization_server.models import RedeemedCode
from mcp_server.settings import mcp_settings


def abandoned(age_seconds: float) -> Any:
    """The queryset of clients registered before ``age_seconds`` ago that hold nothing."""
    Application = get_application_model()
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    sources = (Application.RegistrationSource.DCR, Application.RegistrationSource.CIMD)
    # The registration access token of RFC 7592 is not a token the client got to use MCP.
    used_tokens = AccessToken.objects.filter(application=OuterRef("pk")).exclude(
        scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    cutoff = timezone.now() - timedelta(seconds=age_seconds)
    return (Application.objects.filter(registration_source__in=sources, created__lt=cutoff)
            .exclude(Exists(used_tokens))
            .exclude(Exists(RefreshToken.objects.filter(application=OuterRef("pk"), revoked__isnull=True)))
            .exclude(Exists(get_grant_model().objects.filter(application=OuterRef("pk")))))


def spent_redeemed_codes() -> Any:
    """Redeemed codes none of whose tokens is left to revoke."""
    live_family = get_refresh_token_model().objects.filter(token_family=OuterRef("token_family"),
                                                           revoked__isnull=True)
    nothing_to_revoke = Q(access_token__isnull=True) | Q(access_token__expires__lt=timezone.now())
    return RedeemedCode.objects.filter(nothing_to_revoke).exclude(Exists(live_family))


class Command(BaseCommand):
    help = "Delete abandoned OAuth client registrations (never used to get a token, or holding none)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--age", type=float, default=None,
                            help="seconds a registration must be old (default: ABANDONED_CLIENT_AGE)")
        parser.add_argument("--dry-run", action="store_true", help="only say what would be deleted")

    def handle(self, *args: Any, age: float | None = None, dry_run: bool = False, **options: Any) -> None:
        age = mcp_settings.AUTHORIZATION_SERVER["ABANDONED_CLIENT_AGE"] if age is None else age
        if age < 0:
            raise CommandError("--age must not be negative")
        clients = abandoned(age)
        names = [f"{client.client_id} ({client.name or 'no name'})" for client in clients]
        if dry_run:
            self.stdout.write(f"{len(names)} abandoned client registration(s) would be deleted")
        else:
            clients.delete()
            spent_redeemed_codes().delete()
            self.stdout.write(f"Deleted {len(names)} abandoned client registration(s)")
        for name in names:
            self.stdout.write(f"  {name}")
