"""Text handling shared by the build and the query: analysis, the query parser, highlighting, chunking."""
