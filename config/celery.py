"""The Celery application. Tasks live in each app's ``tasks.py``; the beat schedule in settings."""

import os

from celery import Celery
from celery.signals import worker_init, worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

app = Celery("kb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _embedding_model_prepare(**_: object) -> None:
    """The main worker process prepares the e5 model for ONNX Runtime (a conversion of about 20 s the first
    time on a host) before it starts its pool: a pool process must report ready within seconds, and would be
    killed and restarted, again and again, in the middle of a conversion."""
    from search.embeddings.providers import embeddings_prepare

    embeddings_prepare()


@worker_process_init.connect
def _embedding_model_warm(**_: object) -> None:
    """Each worker process loads the query-embedding model before it takes a task."""
    from search.embeddings.spaces import lane_warm

    lane_warm()
