"""Loading a backend's SQL: named statements from ``queries.sql`` and numbered files from
``migrations/``. Both dialects use the same names and ``:param`` placeholders."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from conveyor.machine import sql_macros

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def _read(package: str, name: str) -> str:
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


# A line of SQL, the parameter it depends on (if any), and whether it is kept when that
# parameter is given (``-- if``) or when it is not (``-- unless``).
Line = tuple[str, str | None, bool]


class Statements(dict[str, str]):
    """Statements by name. A statement may hold *optional lines*, each marked
    ``-- if :param`` (kept only when that parameter is not ``None``) or ``-- unless
    :param`` (kept only when it is). So a read with optional filters becomes, per
    combination of filters given, a statement that names only those (an index serves
    each; ``:x IS NULL OR col = :x`` defeats them), and one operation may have variants
    (the rows it answers, the order it reads in) without a second statement.
    ``text(name, params)`` gives the statement for a call."""

    def __init__(self, fixed: dict[str, str], optional: dict[str, list[Line]]) -> None:
        super().__init__(fixed)
        self._optional = optional
        # Per statement, the parameters its lines depend on: a call's variant is which
        # of them it gives (a few lookups, on every call of the hot operations too).
        self._marks = {
            name: tuple(dict.fromkeys(p for _, p, _ in lines if p is not None))
            for name, lines in optional.items()
        }
        self._made: dict[tuple[str, tuple[bool, ...]], str] = {}

    def text(self, name: str, params: Mapping[str, Any] | None) -> str:
        marks = self._marks.get(name)
        if marks is None:
            return self[name]
        given = params or {}
        key = (name, tuple(given.get(p) is not None for p in marks))
        made = self._made.get(key)
        if made is None:
            present = dict(zip(marks, key[1], strict=True))
            kept = [ln for ln, p, when in self._optional[name] if p is None or present[p] is when]
            made = self._made[key] = "\n".join(kept).rstrip().rstrip(";")
        return made

    def map(self, change: Callable[[str], str]) -> Statements:
        """The same statements, each line passed through ``change`` (a dialect's
        placeholder style, say)."""
        return Statements(
            {name: change(sql) for name, sql in self.items()},
            {
                name: [(change(ln), p, when) for ln, p, when in lines]
                for name, lines in self._optional.items()
            },
        )


_OPTIONAL = re.compile(r"^(.*?)\s*--\s*(if|unless)\s+:(\w+)\s*$")


def load_queries(package: str, macros: dict[str, str]) -> Statements:
    """The statements of the package's ``queries/*.sql`` files, with ``{macro}``
    expanded: the dialect's own, and the state machine's ``{from_<transition>}`` guards.
    A name may be defined once only."""
    macros = {**sql_macros(), **macros}
    folder = resources.files(package).joinpath("queries")
    fixed: dict[str, str] = {}
    optional: dict[str, list[Line]] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        parts = _NAME.split(entry.read_text(encoding="utf-8"))
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in fixed:
                raise RuntimeError(f"{package}: statement {name!r} is defined twice")
            lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
            text = expand("\n".join(lines).rstrip().rstrip(";"), macros)
            fixed[name] = text
            marked = [_OPTIONAL.match(ln) for ln in text.splitlines()]
            if any(marked):
                optional[name] = [
                    (m.group(1), m.group(3), m.group(2) == "if") if m else (ln, None, True)
                    for ln, m in zip(text.splitlines(), marked, strict=True)
                ]
    return Statements(fixed, optional)


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


def in_order(*names: str) -> Callable[[Any, Any], int]:
    """A session handler for an operation that changes rows, performed as the
    statements ``names`` in order, each with the operation's parameters, inside the
    session's transaction; answers how many rows the first changed."""

    def run(session: Any, op: Any) -> int:
        params = op.params()
        changed: int = session.execute(names[0], params)
        for name in names[1:]:
            session.execute(name, params)
        return changed

    return run


def in_order_async(*names: str) -> Callable[[Any, Any], Awaitable[int]]:
    """The same for an asynchronous session."""

    async def run(session: Any, op: Any) -> int:
        params = op.params()
        changed: int = await session.execute(names[0], params)
        for name in names[1:]:
            await session.execute(name, params)
        return changed

    return run
