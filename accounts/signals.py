"""Every new user gets a profile (their focus feeds the browse page's prompts)."""

from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def create_profile(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    if created:
        from accounts.models import UserProfile

        UserProfile.objects.get_or_create(user=instance)
