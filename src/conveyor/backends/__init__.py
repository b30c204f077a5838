"""Storage backends. Each keeps its schema, migrations and statements together as SQL;
``base`` holds the seam they share."""

from conveyor.backends.base import Backend, Session

__all__ = ["Backend", "Session"]
