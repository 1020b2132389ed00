"""Services of the search app. Surfaces call ``retrieve`` (and nothing lower) for search."""


def retrieve(*, query):  # type: ignore[no-untyped-def]
    from search.services.retrieve import retrieve as _retrieve

    return _retrieve(query=query)


# Importing the submodule ``search.services.retrieve`` (the wrapper above does, on first call) rebinds this
# package's ``retrieve`` attribute to that module, after which ``from search.services import retrieve``
# would hand out a module. Binding the function here, last, keeps the name a function in every import order.
from search.services.retrieve import retrieve  # noqa: E402,F811
