import pytest


@pytest.fixture(autouse=True)
def _clear_cache():
    """Each test starts with an empty cache (rate limits, query embeddings)."""
    from django.core.cache import cache

    cache.clear()
    yield
