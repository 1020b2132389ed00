import pytest


@pytest.fixture(autouse=True)
def _clear_cache():
    """Each test starts with an empty cache (rate limits, query embeddings)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(scope="session", autouse=True)
def _lane_threads_closed_before_the_database_goes(django_db_setup, django_db_blocker):
    """Lane threads (search.services.lanes) hold connections to the test database: close them before
    pytest-django drops it."""
    yield
    from search.services.lanes import lane_pool_close

    lane_pool_close()
