"""Signals: only bookkeeping that must follow a write wherever it happens (no indexing here)."""

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import Signal, receiver

# Sent by search.services.retrieve after every search with ``query``, ``result`` and ``corpus``.
# Receivers (the query log, metrics) must be cheap and must never raise into the search.
search_performed = Signal()


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def create_profile(sender, instance, created, **kwargs):  # type: ignore[no-untyped-def]
    if created:
        from search.models import UserProfile

        UserProfile.objects.get_or_create(user=instance)
