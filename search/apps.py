from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "search"
    verbose_name = "Knowledge base"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from search import receivers  # noqa: F401
