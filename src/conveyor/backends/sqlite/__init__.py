"""The embedded SQLite backend (stdlib ``sqlite3``, WAL)."""

from conveyor.backends.sqlite.backend import SQLiteBackend

__all__ = ["SQLiteBackend"]
