"""The JSON form of conveyor's values: one codec for the HTTP server, its clients and
the command line's ``--json`` output.

Every value is a frozen dataclass, and its JSON form is derived from the dataclass
fields and their types: times as ISO 8601 text, enums as their value, tuples as
arrays, nested dataclasses as objects. A field added to ``Job`` travels over the wire
without being listed anywhere else. Two pieces of field metadata shape the form:
``{"json": "claim_id"}`` names a field differently on the wire, and ``{"doc": "…"}``
describes it in the HTTP API's schema.

This module knows no value class: ``conveyor.job`` and ``conveyor.info`` use it, so it
imports neither."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Any, NamedTuple, TypeVar

from conveyor.errors import ConveyorError

T = TypeVar("T")
Encoder = Callable[[Any], Any]
Decoder = Callable[[Any], Any]
JSON_NAME = "alias"
DOC = "description"


class CodecError(ConveyorError):
    """A JSON document does not have the shape of the value it should hold."""

    code = "bad_response"


class JsonField(NamedTuple):
    """One field of a dataclass as its JSON form carries it."""

    attribute: str
    name: str  # the key in the JSON object
    hint: Any  # the field's type
    required: bool  # a document without it cannot be decoded
    doc: str | None
    init: bool  # passed to the constructor (else derived by the class itself)


def to_json(value: Any) -> Any:
    """A value (a dataclass, a list or mapping of them, a time, an enum) as plain JSON
    data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encoder(type(value))(value)
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
    """A ``cls`` from its JSON form. Unknown keys are ignored and an absent field that
    may be null reads as null, so older clients read newer servers (and servers that
    leave out what a reader may not see)."""
    hint: Any = cls  # (a class is hashable, as the cache wants)
    decoded: T = _decoder(hint)(data)
    return decoded


def json_fields(cls: type[Any]) -> tuple[JsonField, ...]:
    """The fields of dataclass ``cls`` in JSON order, with their wire names."""
    hint: Any = cls
    return _json_fields(hint)


@cache
def _json_fields(cls: Any) -> tuple[JsonField, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        has_default = f.default is not dataclasses.MISSING or (
            f.default_factory is not dataclasses.MISSING
        )
        out.append(
            JsonField(
                attribute=f.name,
                name=f.metadata.get(JSON_NAME, f.name),
                hint=hints[f.name],
                required=f.init and not has_default and not _nullable(hints[f.name]),
                doc=f.metadata.get(DOC),
                init=f.init,
            )
        )
    return tuple(out)


# -- encoding -----------------------------------------------------------------------
@cache
def _encoder(cls: Any) -> Encoder:
    # Hot path (every job the server answers): each field's conversion is chosen once.
    plan = [(f.attribute, f.name, _value_encoder(f.hint)) for f in json_fields(cls)]

    def encode(value: Any) -> dict[str, Any]:
        out = {}
        for attribute, name, convert in plan:
            raw = getattr(value, attribute)
            out[name] = raw if convert is None or raw is None else convert(raw)
        return out

    return encode


def _value_encoder(hint: Any) -> Encoder | None:
    """How to encode a value of type ``hint``; None: it is JSON already."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _value_encoder(options[0]) if len(options) == 1 else to_json
    if origin in (tuple, list):
        return to_json
    if hint is datetime:
        return datetime.isoformat
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum_value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _encoder(hint)
    if hint is Any or hint in (str, int, float, bool):
        return None  # payloads, results and details are JSON already
    return to_json


def _enum_value(value: Enum) -> Any:
    return value.value


# -- decoding -----------------------------------------------------------------------
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
        return lambda data: tuple(item(x) for x in _array(data, hint))
    if origin is list:
        item = _decoder(typing.get_args(hint)[0])
        return lambda data: [item(x) for x in _array(data, hint)]
    if hint is datetime:
        return parse_time
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum_decoder(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    return _keep


def _dataclass_decoder(cls: Any) -> Decoder:
    # What an absent field becomes: an error, null, or (None here) the field's default.
    plan = [
        (f, _decoder(f.hint), "error" if f.required else "null" if _no_default(cls, f) else None)
        for f in json_fields(cls)
        if f.init
    ]

    def decode(data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise CodecError(f"expected a JSON object for {cls.__name__}, got {data!r:.80}")
        values = {}
        for field, decoder, absent in plan:
            if field.name in data:
                values[field.attribute] = decoder(data[field.name])
            elif absent == "error":
                raise CodecError(f"{cls.__name__}: the field {field.name!r} is missing")
            elif absent == "null":
                values[field.attribute] = None
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise CodecError(f"{cls.__name__}: {exc}") from None

    return decode


def _enum_decoder(cls: type[Enum]) -> Decoder:
    def decode(data: Any) -> Enum:
        try:
            return cls(data)
        except ValueError:
            raise CodecError(f"{cls.__name__}: unknown value {data!r:.80}") from None

    return decode


def parse_time(data: Any) -> datetime:
    try:
        return datetime.fromisoformat(data)
    except (TypeError, ValueError):
        raise CodecError(f"expected an ISO 8601 time, got {data!r:.80}") from None


def _array(data: Any, hint: Any) -> Any:
    if not isinstance(data, list):
        raise CodecError(f"expected a JSON array for {hint}, got {data!r:.80}")
    return data


def _nullable(hint: Any) -> bool:
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _no_default(cls: type[Any], field: JsonField) -> bool:
    f = cls.__dataclass_fields__[field.attribute]
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _keep(data: Any) -> Any:
    return data


__all__ = ["CodecError", "JsonField", "from_json", "json_fields", "parse_time", "to_json"]
