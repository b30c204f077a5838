"""The embedded SQLite backend (stdlib ``sqlite3``, WAL)."""

from conveyor.drivers.sqlite.driver import SQLiteDriver

__all__ = ["SQLiteDriver"]
