"""How a database dialect stores conveyor's values, and how its rows become ``Job``
objects. Shared by the synchronous and asynchronous backends of a dialect.

The row decoder is derived from ``Job``'s dataclass fields and their types, so a field
added to ``Job`` (and its column, in the migrations) is read without a line here."""

from __future__ import annotations

import dataclasses
import json
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import MISSING
from datetime import datetime, timedelta, timezone
from enum import Enum
from functools import cached_property
from typing import Any, ClassVar, NamedTuple

from conveyor.codec import json_fields
from conveyor.frozen import builder
from conveyor.job import AttemptError, Job, Progress

Row = Mapping[str, Any]
Read = Callable[[Any], Any]
# (attribute, column or JSON member, how its value is read (None: as it is), what a
# NULL reads as (None, or the field's default when it cannot be None))
Plan = tuple[tuple[str, str, Read | None, Any], ...]

# Where a field of ``Job`` lives when not in the column of its name (``group`` is an SQL
# keyword). A nested value (``progress``) is spread over columns ``<field>_<member>``.
_COLUMNS = {"group": "job_group"}
_NOT_STORED = {"deduplicated"}  # how enqueue found the job, not a property of it
_NO_PROGRESS = Progress()
# Every claimed, listed and completed job is built here: ``Job(**fields)``, set field by
# field through ``object.__setattr__``, took a third of a row's decoding.
_make_job = builder(Job)

_UTC = timezone.utc
# Subtracting one of these drops a time's sub-millisecond part: several times cheaper than
# ``datetime.replace(microsecond=...)``, whose keyword call cost 1.8 µs a time read (two
# of a claimed job's times are its own, the rest its batch's).
_SUB_MILLISECOND = tuple(timedelta(0, 0, n) for n in range(1000))


def utc_milliseconds(value: datetime) -> datetime:
    """``value`` in UTC, to the millisecond: SQLite keeps milliseconds, the other
    databases microseconds, and conveyor reads every one alike. A naive value is UTC."""
    tz = value.tzinfo
    if tz is not _UTC:
        value = (
            datetime.combine(value.date(), value.time(), _UTC)
            if tz is None
            else value.astimezone(_UTC)
        )
    extra = value.microsecond % 1000
    return value - _SUB_MILLISECOND[extra] if extra else value


class Values(ABC):
    dialect: ClassVar[str]

    @abstractmethod
    def encode_time(self, value: datetime) -> Any:
        """A UTC datetime as the database stores it (also inside JSON parameters)."""

    @abstractmethod
    def decode_time(self, value: Any) -> datetime | None: ...

    @abstractmethod
    def decode_json(self, value: Any) -> Any: ...

    def decode_job(self, row: Row, *, deduplicated: bool = False) -> Job:
        # Hot path: every claimed and completed job passes here, so a job without
        # progress shares one empty Progress.
        plan = self._progress_plan
        for _, column, _, _ in plan:
            if row[column] is not None:
                progress = Progress(**self._read(row, plan))
                break
        else:
            progress = _NO_PROGRESS
        return self._job_decoder(row, progress, deduplicated)

    @staticmethod
    def _read(row: Row, plan: Plan) -> dict[str, Any]:
        return {
            name: null if (raw := row[column]) is None else raw if read is None else read(raw)
            for name, column, read, null in plan
        }

    @cached_property
    def _job_plan(self) -> Plan:
        return tuple(
            (f.attribute, column, self._reader(f.hint), f.null) for f, column in _job_fields()
        )

    @cached_property
    def _job_decoder(self) -> Callable[[Row, Progress, bool], Job]:
        return _compile_decoder(self._job_plan)

    @cached_property
    def _progress_plan(self) -> Plan:
        return tuple(
            (f.attribute, column, self._reader(f.hint), f.null) for f, column in _progress_fields()
        )

    @cached_property
    def _attempt_plan(self) -> Plan:
        # An attempt's entry is a JSON object whose times are as the dialect's JSON
        # holds them (``_json_time``).
        return tuple(
            (f.attribute, f.attribute, self._reader(f.hint, time=self._json_time), f.null)
            for f in _stored_fields(AttemptError)
        )

    def _attempt_errors(self, raw: Any) -> tuple[AttemptError, ...]:
        plan = self._attempt_plan
        # An entry written before a member existed lacks it: it reads as null.
        return tuple(
            AttemptError(**self._read(_Defaulting(entry), plan)) for entry in self.decode_json(raw)
        )

    def _reader(self, hint: Any, *, time: Read | None = None) -> Read | None:
        """How a stored value of type ``hint`` is read; None: it is stored as it is
        (integers and text)."""
        args = typing.get_args(hint)
        if type(None) in args:  # Optional: NULLs never reach a reader
            inner = [a for a in args if a is not type(None)]
            return self._reader(inner[0], time=time) if len(inner) == 1 else self.decode_json
        if hint is datetime:
            return time or self.decode_time
        if isinstance(hint, type) and issubclass(hint, Enum):
            return {member.value: member for member in hint}.__getitem__
        if typing.get_origin(hint) is tuple:  # a JSON array
            if args[0] is AttemptError:
                return self._attempt_errors
            decode = self.decode_json
            return lambda raw: tuple(decode(raw))
        if hint is Any:
            return self.decode_json
        return None

    def _json_time(self, value: Any) -> datetime:
        """A time stored inside JSON: epoch seconds (SQLite) or ISO 8601 (PostgreSQL)."""
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        decoded = self.decode_time(value)
        assert decoded is not None
        return decoded

    @staticmethod
    def json_param(items: Any) -> str:
        return json.dumps(items, separators=(",", ":"), ensure_ascii=False)

    @staticmethod
    def rows_param(rows: list[list[Any]]) -> Any:
        """The jobs of a bulk insert (``InsertJobs``), each a list of
        its columns, as the driver takes them: a JSON array unless the driver binds them
        otherwise."""
        return json.dumps(rows, separators=(",", ":"), ensure_ascii=False)


def _compile_decoder(plan: Plan) -> Callable[[Row, Progress, bool], Job]:
    """A function that makes a ``Job`` of a row by ``plan``: one line per field, each read
    by its column's name and stored straight into the slot of ``Job``'s unfrozen twin
    (``conveyor.frozen``), which then becomes a ``Job``. Reading the plan in a loop into
    a dict and passing that by keywords took 1.5 to 1.9 times as long
    (``benchmarks/decode_rows.py``). Generated once, as dataclasses make their
    ``__init__``."""
    names = {name for name, _, _, _ in plan} | {"progress", "deduplicated"}
    fields = {f.name for f in dataclasses.fields(Job)}
    if names != fields:  # a field of Job the plan does not fill would be left unset
        raise TypeError(f"Job's decoder: fields {sorted(fields ^ names)} not planned")
    scope: dict[str, Any] = {"_new": object.__new__, "_Twin": _make_job}
    lines = ["def decode(row, progress, deduplicated):", "    job = _new(_Twin)"]
    for i, (name, column, read, null) in enumerate(plan):
        scope[f"_read{i}"], scope[f"_null{i}"] = read, null
        value = f"row[{column!r}]"
        if read is None and null is None:
            lines.append(f"    job.{name} = {value}")
        else:
            raw = f"_read{i}(raw)" if read is not None else "raw"
            lines.append(f"    raw = {value}")
            lines.append(f"    job.{name} = _null{i} if raw is None else {raw}")
    lines += [
        "    job.progress = progress",
        "    job.deduplicated = deduplicated",
        "    job.__post_init__()  # becomes a Job, then Job's own __post_init__",
        "    return job",
    ]
    exec("\n".join(lines), scope)  # the source is made above, from Job's fields
    decode: Callable[[Row, Progress, bool], Job] = scope["decode"]
    return decode


class _Stored(NamedTuple):
    attribute: str
    hint: Any
    null: Any  # what a NULL reads as


def _stored_fields(cls: type[Any]) -> list[_Stored]:
    """The fields of ``cls`` with what a NULL in the database means for each: None, or
    for a field that cannot be None (an empty tuple, say) its default."""
    out = []
    for f in json_fields(cls):
        default = cls.__dataclass_fields__[f.attribute].default
        nullable = f.hint is Any or type(None) in typing.get_args(f.hint)
        out.append(
            _Stored(f.attribute, f.hint, None if nullable or default is MISSING else default)
        )
    return out


def _job_fields() -> list[tuple[_Stored, str]]:
    """``Job``'s stored fields (its progress apart), each with its column."""
    return [
        (f, _COLUMNS.get(f.attribute, f.attribute))
        for f in _stored_fields(Job)
        if f.attribute not in _NOT_STORED and f.attribute != "progress"
    ]


def _progress_fields() -> list[tuple[_Stored, str]]:
    return [(f, f"progress_{f.attribute}") for f in _stored_fields(Progress)]


def job_columns() -> list[str]:
    """The columns a job is read from (``decode_job``): a statement that reads whole
    jobs may name these instead of ``*`` (on MySQL, ``*`` also reads the generated
    columns that only its indexes need)."""
    return [column for _, column in (*_job_fields(), *_progress_fields())]


def json_columns() -> list[str]:
    """Those of ``job_columns`` that hold JSON text (a value of any type, or an array)."""
    return [column for f, column in (*_job_fields(), *_progress_fields()) if _json_hint(f.hint)]


def _json_hint(hint: Any) -> bool:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if type(None) in typing.get_args(hint) and len(args) == 1:
        hint = args[0]
    return hint is Any or typing.get_origin(hint) is tuple


class _Defaulting(dict[str, Any]):
    def __missing__(self, key: str) -> None:
        return None
