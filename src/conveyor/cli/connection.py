"""Opening the queue for a command: fail fast, with one line, when the database is not
there, and never create a database as a side effect of looking at one."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import conveyor
from conveyor.config import Settings, database_url, parse_url
from conveyor.errors import ConfigurationError

# How long the CLI waits for a PostgreSQL server before giving up (unless the URL sets
# connect_timeout): the library waits 10 s, but a person at a terminal wants an answer.
CONNECT_TIMEOUT_S = 3


@contextmanager
def open_queue(
    db: str | None, *, create: bool = False, migrate: bool = True
) -> Iterator[conveyor.Queue]:
    """The queue at ``db`` (or ``$CONVEYOR_DATABASE_URL``, or the default), its schema
    brought up to date unless ``migrate=False``. ``create=False``: a database without
    conveyor's tables (or a SQLite file that does not exist) is an error, so a typo in a
    URL leaves no empty database or schema behind."""
    url = database_url(command_line=db)
    settings = parse_url(url)
    options: dict[str, Any] = {}
    if settings.backend == "sqlite":
        _check_sqlite_file(settings, create=create)
    else:
        # The pool logs each failed attempt; the command reports the reason once.
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
        if "connect_timeout" not in settings.backend_options:
            options["connect_timeout"] = CONNECT_TIMEOUT_S
    queue = conveyor.connect(url, migrate=False, use_env=False, **options)
    try:
        version = queue.schema_version()
        if version == 0 and not create:
            raise ConfigurationError(
                f"no conveyor tables in {queue.url}; create them with 'conveyor migrate'"
            )
        if migrate and version < queue.latest_schema_version:
            queue.migrate()
        yield queue
    finally:
        queue.close()


def _check_sqlite_file(settings: Settings, *, create: bool) -> None:
    if settings.target == ":memory:":
        raise ConfigurationError(
            "sqlite:///:memory: lives only inside one process; give the CLI a file"
        )
    path = Path(settings.target)
    if not path.parent.is_dir():
        raise ConfigurationError(f"cannot open SQLite database {str(path)!r}: no such directory")
    if not create and not path.exists():
        raise ConfigurationError(
            f"no database at {str(path)!r}; create it with 'conveyor migrate --db "
            f"sqlite:///{settings.target}' (or check --db / $CONVEYOR_DATABASE_URL)"
        )
