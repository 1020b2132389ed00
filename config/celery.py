"""The Celery application. Tasks live in each app's ``tasks.py``; the beat schedule in settings."""

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("kb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _embedding_model_warm(**_: object) -> None:
    """Each worker process loads the query-embedding model before it takes a task."""
    from search.engine.vector import lane_warm

    lane_warm()
