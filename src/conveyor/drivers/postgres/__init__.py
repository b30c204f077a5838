"""The PostgreSQL backend (psycopg 3 with a connection pool, SKIP LOCKED, LISTEN/NOTIFY)."""

from conveyor.drivers.postgres.driver import PostgresDriver

__all__ = ["PostgresDriver"]
