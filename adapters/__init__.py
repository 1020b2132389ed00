"""Adapter toolkit: the small HTTP rules every surface shares, written once.

A plain package, not a Django app (no models, no settings). It sits between the surfaces and the
engine in the layer contract (pyproject.toml): it may import ``search`` and Django, nothing else of
this project.

- ``adapters.http``: the JSON error envelope, the ``SearchError`` -> HTTP status map, the 429 answer,
  and Django's CSRF check run by hand for views that must answer in JSON.
- ``adapters.auth``: the caller of an API-key surface (``Authorization: Bearer``).
- ``adapters.limits``: spend a request's rate-limit budget (per user when signed in, else per IP).
"""
