"""Services of the search app. Surfaces call ``retrieve`` (and nothing lower) for search.

The submodule ``search.services.retrieve`` has the same name as the function; binding the function here
keeps ``from search.services import retrieve`` a function in every import order.
"""

from search.services.retrieve import retrieve

__all__ = ["retrieve"]
