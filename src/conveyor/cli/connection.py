"""Opening the queue for a command: fail fast, with one line, when the database is not
there, and never create a database as a side effect of looking at one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import conveyor
from conveyor.config import Settings, database_url, parse_url
from conveyor.errors import ConfigurationError, DatabaseError

# How long the CLI waits for a PostgreSQL server before giving up. The library's pool
# keeps retrying for its whole connect_timeout; a person at a terminal wants an answer.
PROBE_TIMEOUT_S = 5


@contextmanager
def open_queue(
    db: str | None, *, create: bool = False, migrate: bool = True
) -> Iterator[conveyor.Queue]:
    """The queue at ``db`` (or ``$CONVEYOR_DATABASE_URL``, or the default), its schema
    brought up to date unless ``migrate=False``. ``create=False``: a database without
    conveyor's tables (or a SQLite file that does not exist) is an error, so a typo in a
    URL leaves no empty database or schema behind."""
    url = database_url(db)
    settings = parse_url(url)
    if settings.backend == "sqlite":
        _check_sqlite_file(settings, create=create)
    else:
        _probe_postgres(settings)
    queue = conveyor.connect(url, migrate=False)
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


def _probe_postgres(settings: Settings) -> None:
    """One direct connection attempt, so a closed port or a wrong password is reported
    at once instead of after the pool's retries."""
    try:
        import psycopg
    except ImportError:
        return  # conveyor.connect explains what to install
    timeout = settings.backend_options.get("connect_timeout", PROBE_TIMEOUT_S)
    try:
        conn = psycopg.connect(settings.target, connect_timeout=max(1, round(timeout)))
    except psycopg.Error as exc:
        reason = _first_line(str(exc))
        raise DatabaseError(f"cannot connect to PostgreSQL: {reason}") from None
    conn.close()


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no reason given"
