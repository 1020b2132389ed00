"""Writes of the search app: content, imports, the index build, embeddings, governance and jobs."""
