"""The MySQL / MariaDB backend (PyMySQL, SKIP LOCKED, a watcher thread for wake-ups)."""

from conveyor.drivers.mysql.driver import MySQLDriver

__all__ = ["MySQLDriver"]
