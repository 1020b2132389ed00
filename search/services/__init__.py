"""Services of the search app. Surfaces call ``retrieve`` (and nothing lower) for search."""


def retrieve(*, query):  # type: ignore[no-untyped-def]
    from search.services.retrieve import retrieve as _retrieve

    return _retrieve(query=query)
