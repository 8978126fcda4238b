"""The demo project. Its Celery app is loaded with it, so ``shared_task`` tasks use it."""

from .celery import app as celery_app

__all__ = ("celery_app",)
