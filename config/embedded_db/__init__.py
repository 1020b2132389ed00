"""A PostgreSQL backend that starts the embedded server on first connection (no DATABASE_URL set)."""
