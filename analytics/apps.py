from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "analytics"
    verbose_name = "Search analytics"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from analytics import metrics, receivers  # noqa: F401

        metrics.allowed_networks()  # a bad METRICS_ALLOWED_IPS fails at start, with the fix
