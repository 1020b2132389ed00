from django.apps import AppConfig


class FollowsConfig(AppConfig):
    name = "follows"
    default_auto_field = "django.db.models.BigAutoField"
