"""Django's PostgreSQL backend for web processes with a session pool: an unreachable server fails fast."""
