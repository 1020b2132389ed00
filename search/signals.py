"""Signals: only bookkeeping that must follow a write wherever it happens (no indexing here)."""

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def create_profile(sender, instance, created, **kwargs):  # type: ignore[no-untyped-def]
    if created:
        from search.models import UserProfile

        UserProfile.objects.get_or_create(user=instance)
