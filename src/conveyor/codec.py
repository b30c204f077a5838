"""The JSON form of conveyor's values, shared by the HTTP server and its clients.

Every value is a frozen dataclass; its JSON form is derived from the dataclass fields
and their types (times as ISO 8601 text, enums as their value, tuples as arrays), so a
field added to ``Job`` travels over the wire without being listed anywhere else."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Any, TypeVar

from conveyor.errors import ConveyorError
from conveyor.info import QueueSettings, Rate, ScheduleInfo, Throughput, WorkerInfo
from conveyor.job import AttemptError, Claim, Job, Progress, Stats

T = TypeVar("T")
Decoder = Callable[[Any], Any]


class CodecError(ConveyorError):
    """A JSON document does not have the shape of the value it should hold."""

    code = "bad_response"


def to_json(value: Any) -> Any:
    """A dataclass value (or a list of them) as plain JSON data."""
    if isinstance(value, Job):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, Stats):
            out["total"] = value.total
        return out
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    return value


def from_json(cls: type[T], data: Any) -> T:
    """A ``cls`` from its JSON form; unknown keys are ignored, so older clients read
    newer servers."""
    decoded: T = _decoder(cls)(data)  # type: ignore[arg-type]  # classes are hashable
    return decoded


def job_from_json(data: Mapping[str, Any], *, deduplicated: bool | None = None) -> Job:
    job = from_json(Job, data)
    if deduplicated is not None and deduplicated != job.deduplicated:
        job = dataclasses.replace(job, deduplicated=deduplicated)
    return job


@cache
def _decoder(hint: Any) -> Decoder:
    """A function turning JSON data into a value of type ``hint``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        inner = _decoder(options[0]) if len(options) == 1 else _keep
        return lambda data: None if data is None else inner(data)
    if origin is tuple:
        item = _decoder(typing.get_args(hint)[0])
        return lambda data: tuple(item(x) for x in data)
    if origin is list:
        item = _decoder(typing.get_args(hint)[0])
        return lambda data: [item(x) for x in data]
    if hint is datetime:
        return parse_time
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    return _keep


def _dataclass_decoder(cls: type[Any]) -> Decoder:
    hints = typing.get_type_hints(cls)
    fields = [
        (f.name, _decoder(hints[f.name]), f.default is dataclasses.MISSING
         and f.default_factory is dataclasses.MISSING)
        for f in dataclasses.fields(cls)
        if f.init
    ]  # fmt: skip

    def decode(data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise CodecError(f"expected a JSON object for {cls.__name__}, got {data!r:.80}")
        values = {}
        for name, decoder, required in fields:
            if name in data:
                values[name] = decoder(data[name])
            elif required:
                raise CodecError(f"{cls.__name__}: the field {name!r} is missing")
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise CodecError(f"{cls.__name__}: {exc}") from None

    return decode


def parse_time(data: Any) -> datetime:
    try:
        return datetime.fromisoformat(data)
    except (TypeError, ValueError):
        raise CodecError(f"expected an ISO 8601 time, got {data!r:.80}") from None


def _keep(data: Any) -> Any:
    return data


__all__ = [
    "AttemptError",
    "Claim",
    "CodecError",
    "Job",
    "Progress",
    "QueueSettings",
    "Rate",
    "ScheduleInfo",
    "Stats",
    "Throughput",
    "WorkerInfo",
    "from_json",
    "job_from_json",
    "parse_time",
    "to_json",
]
