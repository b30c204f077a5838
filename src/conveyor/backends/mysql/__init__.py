"""The MySQL / MariaDB backend (PyMySQL, SKIP LOCKED, a watcher thread for wake-ups)."""

from conveyor.backends.mysql.backend import MySQLBackend

__all__ = ["MySQLBackend"]
