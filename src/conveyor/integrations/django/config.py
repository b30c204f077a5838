"""Reading ``settings.CONVEYOR``, and the conveyor URL of a Django database."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings as django_settings
from django.db import connections

from conveyor.errors import ConfigurationError

KNOWN_KEYS = {"DATABASE_URL", "USING", "SCHEMA", "APP"}
# Keys of a PostgreSQL database's OPTIONS that are Django's, not libpq's.
_DJANGO_OPTIONS = {"isolation_level", "server_side_binding", "pool", "assume_role", "context",
                   "cursor_factory"}  # fmt: skip
_ENGINES = {
    "django.db.backends.sqlite3": "sqlite",
    "django.db.backends.postgresql": "postgresql",
    "django.db.backends.mysql": "mysql",  # mysqlclient; MariaDB too
}


@dataclass(frozen=True)
class Settings:
    database_url: str | None
    using: str
    schema: str | None
    app: str | None

    def url(self) -> str:
        """The queue's database: the one given, else the Django database ``using``."""
        if self.database_url:
            return self.database_url
        return database_url(connections[self.using].settings_dict, schema=self.schema)


def settings() -> Settings:
    given = getattr(django_settings, "CONVEYOR", None) or {}
    if not isinstance(given, dict):
        raise ConfigurationError(f"settings.CONVEYOR: expected a dict, got {type(given).__name__}")
    unknown = set(given) - KNOWN_KEYS
    if unknown:
        raise ConfigurationError(
            f"settings.CONVEYOR: unknown key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(KNOWN_KEYS))}"
        )
    return Settings(
        database_url=given.get("DATABASE_URL")
        or getattr(django_settings, "CONVEYOR_DATABASE_URL", None),
        using=given.get("USING", "default"),
        schema=given.get("SCHEMA"),
        app=given.get("APP"),
    )


def database_url(database: dict[str, Any], *, schema: str | None = None) -> str:
    """The conveyor URL of a Django database (its ``DATABASES`` entry)."""
    engine = _ENGINES.get(database.get("ENGINE", ""))
    if engine is None:
        raise ConfigurationError(
            f"conveyor runs on SQLite, PostgreSQL and MySQL, not {database.get('ENGINE')!r}; "
            "set CONVEYOR['DATABASE_URL'] to a database of its own"
        )
    if engine == "sqlite":
        name = str(database.get("NAME") or "")
        if not name or name == ":memory:" or "mode=memory" in name:
            raise ConfigurationError(
                "an in-memory SQLite database is private to one connection: give Django a "
                "database file (for tests: DATABASES['default']['TEST']['NAME'])"
            )
        return f"sqlite:///{Path(name).resolve()}"
    user = quote(str(database.get("USER") or ""), safe="")
    password = database.get("PASSWORD")
    auth = f"{user}:{quote(str(password), safe='')}@" if password else f"{user}@" if user else ""
    host = str(database.get("HOST") or "")
    port = f":{database['PORT']}" if database.get("PORT") else ""
    name = quote(str(database.get("NAME") or ""))
    if engine == "mysql":
        # conveyor's MySQL connections are TCP ones: a socket path, or credentials kept
        # in an option file, cannot be followed.
        if host.startswith("/") or (database.get("OPTIONS") or {}).get("read_default_file"):
            raise ConfigurationError(
                "conveyor connects to MySQL over TCP with the HOST, PORT, USER, PASSWORD "
                "and NAME of the Django database; set CONVEYOR['DATABASE_URL'] "
                "(mysql://user:password@host:3306/name) for this one"
            )
        return f"mysql://{auth}{host}{port}/{name}"
    query = {
        k: v
        for k, v in (database.get("OPTIONS") or {}).items()
        if k not in _DJANGO_OPTIONS and isinstance(v, (str, int))
    }
    if schema:
        query["schema"] = schema
    tail = f"?{urlencode(query)}" if query else ""
    return f"postgresql://{auth}{host}{port}/{name}{tail}"
