"""Federated search (docs/federation.md): peers (``peers``), the answer this instance gives a peer's key
(``answer``), asking a peer as untrusted input (``client``, ``protocol``) and one query across all of
them, ranked together as one knowledge base holding them all would rank them (``federated``). Keys peers
issued us are encrypted at rest (``secrets``)."""
