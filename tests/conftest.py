import pytest


@pytest.fixture(autouse=True)
def _clear_cache():
    """Each test starts with an empty cache (rate limits, query embeddings) and no per-process statistics of
    another test's corpus (the vector lane's background, the language shares) or copy of its peers."""
    from django.core.cache import cache

    from search.embeddings import spaces
    from search.engine import background, lane_weights
    from search.federation import peers

    cache.clear()
    peers.peers_forget()
    background.background_forget()
    lane_weights.corpus_language_shares_forget()
    spaces.space_caches_forget()
    yield


@pytest.fixture(scope="session", autouse=True)
def _lane_threads_closed_before_the_database_goes(django_db_setup, django_db_blocker):
    """Lane threads (search.engine.lanes) hold connections to the test database: close them before
    pytest-django drops it."""
    yield
    from search.engine.lanes import lane_pool_close

    lane_pool_close()


@pytest.fixture(autouse=True)
def _rate_limit_window_pinned(monkeypatch):
    """django-ratelimit counts in fixed windows of wall-clock time. A test that spends a budget (30 searches,
    then the 31st is refused) must not straddle a window's edge, where its count would reset halfway: on a
    slow machine that is a flake, not a finding. The window is pinned to the test's start; the limits are
    otherwise exactly as in production (servers started in-process share the pin)."""
    import time as real_time
    import types

    from django_ratelimit import core

    pinned = real_time.time()
    monkeypatch.setattr(core, "time", types.SimpleNamespace(time=lambda: pinned))


def pytest_collection_modifyitems(items):
    """The toy calibration's refit runs first, on a database no other test has touched: transaction=True tests
    leave state behind that changes what the engine records for the demo (not pinned down yet), and the
    refit must be compared with the committed table exactly."""
    items.sort(key=lambda item: 0 if item.nodeid.startswith("tests/search/engine/test_toy_calibration.py") else 1)
