"""``manage.py mcp_client_rotate_keys``: encrypt every stored OAuth credential again under the first
key of ``MCP_CLIENT["OAUTH_ENCRYPTION_KEYS"]``, so that the older keys can then be removed."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.db import transaction

from ...crypto import cipher, rotate
from ...models import OAuthCredential


class Command(BaseCommand):
    help = "Encrypt every stored OAuth client credential again under the first configured key."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--database", default="default", help="the database alias (default: default)")

    def handle(self, *args, database: str, **options) -> None:
        fernet = cipher()
        rotated = 0
        for pk in OAuthCredential.objects.using(database).values_list("pk", flat=True):
            with transaction.atomic(using=database):
                # Locked as the storage locks it: a refresh in progress finishes first.
                row = OAuthCredential.objects.using(database).select_for_update().filter(pk=pk).first()
                if row is None:
                    continue
                for field in ("client_information", "tokens"):
                    if getattr(row, field):
                        setattr(row, field, rotate(fernet, getattr(row, field)))
                row.save(update_fields=["client_information", "tokens"])
                rotated += 1
        self.stdout.write(f"{rotated} stored credential(s) encrypted under the first key")
