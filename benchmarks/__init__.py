"""Benchmarks and relevance evaluation: ``manage.py bench`` and ``manage.py evaluate``.

Outside the engine on purpose: it measures ``search`` through its public functions only, and its own
dependencies (bm25s, matplotlib) come with the ``[bench]`` extra (``pip install -e '.[bench]'``; the dev
extra includes it).
"""

BENCH_EXTRA = "pip install -e '.[bench]' (the dev extra, which `make test` installs, includes it)"


def require(module: str) -> object:
    """``module`` imported, or a one-line error that says how to install the ``[bench]`` extra."""
    import importlib

    from search.errors import SearchError

    try:
        return importlib.import_module(module)
    except ImportError:
        raise SearchError(f"{module} is part of the [bench] extra, which is not installed: {BENCH_EXTRA}.") from None

