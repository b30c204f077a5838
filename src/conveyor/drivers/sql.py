"""Loading a backend's SQL: named statements from ``queries.sql`` and numbered files from
``migrations/``. Both dialects use the same names and ``:param`` placeholders."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def _read(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


def load_queries(package: str, macros: dict[str, str]) -> dict[str, str]:
    """``{name: statement}`` from the package's ``queries/*.sql`` files, with
    ``{macro}`` expanded. A name may be defined once only."""
    folder = resources.files(package).joinpath("queries")
    queries: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        parts = _NAME.split(entry.read_text(encoding="utf-8"))
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                raise RuntimeError(f"{package}: statement {name!r} is defined twice")
            lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
            queries[name] = expand("\n".join(lines).rstrip().rstrip(";"), macros)
    return queries


def load_migrations(package: str, macros: dict[str, str]) -> list[Migration]:
    folder = resources.files(package).joinpath("migrations")
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            sql = expand(entry.read_text(encoding="utf-8"), macros)
            found.append(Migration(int(match.group(1)), match.group(2), sql))
    found.sort(key=lambda m: m.version)
    expected = list(range(1, len(found) + 1))
    if [m.version for m in found] != expected:
        raise RuntimeError(f"migrations of {package} are not numbered 1..n: {found}")
    return found


def expand(sql: str, macros: dict[str, str]) -> str:
    for name, value in macros.items():
        sql = sql.replace("{" + name + "}", value)
    return sql


def split_statements(script: str, complete: Callable[[str], bool]) -> list[str]:
    """Split a migration into statements: lines are gathered until ``complete`` says
    they form whole statements (``sqlite3.complete_statement`` knows that a trigger's
    body ends at its ``END;``)."""
    statements = []
    buffer: list[str] = []
    for line in script.splitlines():
        if not buffer and (not line.strip() or line.lstrip().startswith("--")):
            continue
        buffer.append(line)
        text = "\n".join(buffer)
        if complete(text):
            statements.append(text.strip())
            buffer = []
    if buffer and "\n".join(buffer).strip():
        raise RuntimeError(f"migration ends inside a statement: {buffer[0]!r}")
    return statements
