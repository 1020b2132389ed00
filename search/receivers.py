"""What follows a write wherever it happens, connected when the app is ready (search.apps): the writers only
send signals, so content services never import the task layer and models never import the engine."""

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from search.models import Synonym
from search.signals import index_marked_dirty


@receiver(index_marked_dirty)
def build_soon(sender: Any, **kwargs: Any) -> None:
    from search.tasks import index_build_enqueue

    index_build_enqueue()


@receiver(post_save, sender=Synonym)
@receiver(post_delete, sender=Synonym)
def synonyms_changed(sender: Any, **kwargs: Any) -> None:
    """The engine caches synonym sets; a change applies to the next search."""
    from search.engine.expansion import synonyms_invalidate

    synonyms_invalidate()
