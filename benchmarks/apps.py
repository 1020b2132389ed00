import os

from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    verbose_name = "Benchmarks and evaluation"

    def ready(self) -> None:
        from benchmarks import real_query

        if os.environ.get(real_query.ENV_FLAG) == "1":  # only in bench's own web server (benchmarks/real_query.py)
            real_query.install()
