"""The project's Celery app: ``celery -A project worker`` runs background tool calls.

Configured the Django way: every ``CELERY_*`` setting of ``project.settings``, and the tasks of
each installed app's ``tasks.py`` (``mcp_server.tasks`` runs background tools).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
