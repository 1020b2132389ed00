"""The retrieval engine: the query lanes, fusion and rerank, passages, the preview and page rows.

Surfaces call ``search.engine.retrieve.retrieve`` and ``search.engine.preview.preview_search``; nothing lower.
"""
