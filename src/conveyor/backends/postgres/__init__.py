"""The PostgreSQL backend (psycopg 3 with a connection pool, SKIP LOCKED, LISTEN/NOTIFY)."""

from conveyor.backends.postgres.backend import PostgresBackend

__all__ = ["PostgresBackend"]
