"""What follows a write wherever it happens, connected when the app is ready (search.apps): the writers only
send signals, so content services never import the task layer and models never import the engine."""

from typing import Any

from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete
from django.dispatch import receiver

from search.models import FederationPeer, Synonym
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


@receiver(post_save, sender=FederationPeer)
@receiver(post_delete, sender=FederationPeer)
@receiver(m2m_changed, sender=FederationPeer.groups.through)
@receiver(post_delete, sender=Group)
def peers_changed(sender: Any, **kwargs: Any) -> None:
    """Every process keeps the enabled peers in memory (search.federation.peers); a change to a peer, its groups
    or a group applies to the next search."""
    from search.federation.peers import peers_changed as changed

    if kwargs.get("action", "post_").startswith("post_"):  # m2m_changed also reports each change before it
        changed()


@receiver(pre_delete, sender=Group)
def peers_lose_a_group(sender: Any, instance: Group, **kwargs: Any) -> None:
    """A peer only that group's members could see is disabled rather than opened to every signed-in user."""
    from search.federation.peers import group_deleting

    group_deleting(instance)
