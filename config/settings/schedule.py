"""The Celery beat schedule: one place, a comment per entry. Times are UTC."""

from celery.schedules import crontab

CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {}
