"""Checks on what callers send, done before anything is written."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

from conveyor.errors import InvalidArgument
from conveyor.job import Status

DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
MAX_JSON_DEPTH = 64
MAX_NAME_LENGTH = 200
MAX_KEY_LENGTH = 1000
INT32 = 2**31 - 1
# What a name may not hold: control characters (C0, DEL, C1) and the invisible marks
# that reorder text (bidirectional embeddings, overrides, isolates, directional marks),
# with which a name can display as another. As a regex character class, in a syntax
# that Python, the JSON Schema of the HTTP API and its Rust validator all read alike.
# A regex, not a scan in Python: names are checked for every job of a bulk enqueue.
NAME_FORBIDDEN = r"\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
NAME_PATTERN = rf"^[^{NAME_FORBIDDEN}]*$"
_FORBIDDEN = re.compile(f"[{NAME_FORBIDDEN}]")
# One encoder for every payload: json.dumps builds a new one per call when given options.
_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)
# And its C part, made once too (``JSONEncoder.encode`` makes one per call): what
# ``_ENCODER.encode`` runs, without the check for circular references, which
# ``_check_json_value`` makes first (a cycle is nested deeper than MAX_JSON_DEPTH).
_MAKE_C_ENCODER: Callable[..., Callable[[Any, int], Iterable[str]]] | None = getattr(
    json.encoder, "c_make_encoder", None
)
_C_ENCODE = (
    None
    if _MAKE_C_ENCODER is None
    else _MAKE_C_ENCODER(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",",
        False, False, False,
    )
)  # fmt: skip
# Names that passed the checks. Tasks and queues repeat on every enqueue, so the regex
# and encoding checks run once per name; bounded, since names come from callers.
_CLEAN_NAMES: set[str] = set()
_CLEAN_NAMES_MAX = 4096


def encode_json(value: Any, name: str, *, max_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> str | None:
    """Serialise ``value`` to JSON text, or refuse it with a message naming ``name``.

    Refused: values JSON cannot hold (NaN, infinity, non-string keys, objects), NUL
    characters (PostgreSQL cannot store them), nesting deeper than MAX_JSON_DEPTH and
    text longer than ``max_bytes``."""
    if value is None:
        return None
    _check_json_value(value, name, 0)
    try:
        text = _ENCODER.encode(value) if _C_ENCODE is None else "".join(_C_ENCODE(value, 0))
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{name}: expected a JSON-serialisable value ({exc})") from None
    try:
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{name}: text may not contain lone surrogates") from None
    if size > max_bytes:
        raise InvalidArgument(f"{name}: expected at most {max_bytes} bytes of JSON, got {size}")
    return text


_LEAVES = frozenset({int, bool, type(None)})


# Reading back what ``encode_json`` wrote: the scanner alone, as ``json.loads`` runs it
# after looking for whitespace around the value (two regular expressions) that this
# text never has.
_SCAN: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]


def decode_own_json(text: str) -> Any:
    """The JSON text ``encode_json`` made, read back: a copy of the value it encoded, as
    the database will give it (tuples as lists, for one)."""
    value, _ = _SCAN(text, 0)
    return value


def _check_json_value(value: Any, name: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise InvalidArgument(f"{name}: expected JSON nested at most {MAX_JSON_DEPTH} deep")
    kind = type(value)
    if kind is int or kind is bool or value is None:  # the commonest leaves, first
        return
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidArgument(f"{name}: text may not contain NUL characters")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{name}: expected finite numbers, got {value}")
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArgument(
                    f"{name}: expected string object keys, got {type(k).__name__}"
                )
            if "\x00" in k:
                raise InvalidArgument(f"{name}: text may not contain NUL characters")
            if type(v) not in _LEAVES or depth >= MAX_JSON_DEPTH:  # a leaf needs no call
                _check_json_value(v, name, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            if type(v) not in _LEAVES or depth >= MAX_JSON_DEPTH:
                _check_json_value(v, name, depth + 1)
    elif value is None or isinstance(value, (bool, int)):
        return
    else:
        raise InvalidArgument(
            f"{name}: expected a JSON-serialisable value, got {type(value).__name__}"
        )


def name(value: Any, what: str, *, max_length: int = MAX_NAME_LENGTH, remember: bool = True) -> str:
    """A name (queue, task, key, group, worker, subscriber, …): non-empty text without
    control characters or bidirectional overrides. ``remember=False`` for values that
    rarely repeat (keys)."""
    if type(value) is str and value in _CLEAN_NAMES and len(value) <= max_length:
        return value
    if not isinstance(value, str):
        raise InvalidArgument(f"{what}: expected a string, got {type(value).__name__}")
    if not value or len(value) > max_length:
        raise InvalidArgument(f"{what}: expected 1 to {max_length} characters, got {len(value)}")
    found = _FORBIDDEN.search(value)
    if found:
        raise InvalidArgument(
            f"{what}: may not contain control characters or bidirectional text controls "
            f"(found U+{ord(found.group()):04X} at position {found.start()})"
        )
    _check_encodable(value, what)
    if remember and type(value) is str:
        if len(_CLEAN_NAMES) >= _CLEAN_NAMES_MAX:
            _CLEAN_NAMES.clear()
        _CLEAN_NAMES.add(value)
    return value


def key(value: Any) -> str | None:
    if value is None:
        return None
    return name(value, "key", max_length=MAX_KEY_LENGTH, remember=False)


def integer(value: Any, what: str, *, low: int = -INT32, high: int = INT32) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what}: expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidArgument(f"{what}: expected an integer from {low} to {high}, got {value}")
    return value


def optional_integer(value: Any, what: str, *, low: int = 0, high: int = INT32) -> int | None:
    return None if value is None else integer(value, what, low=low, high=high)


def text(value: Any, what: str, *, max_length: int = 64 * 1024) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what}: expected a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArgument(f"{what}: text may not contain NUL characters")
    _check_encodable(value, what)
    return value[:max_length]


def _check_encodable(value: str, what: str) -> None:
    """Lone surrogates (JSON escapes such as \\ud800) cannot be stored as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what}: text may not contain lone surrogates") from None


def timestamp(value: Any, what: str) -> datetime | None:
    """A timezone-aware datetime, converted to UTC. Naive datetimes are refused: guessing
    a zone would schedule jobs hours off."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{what}: expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{what}: expected a timezone-aware datetime, got a naive one")
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31T23:00-14:00 is past the last representable UTC time
        raise InvalidArgument(
            f"{what}: expected a time between years 1 and 9999 in UTC, got {value.isoformat()}"
        ) from None


def status(value: Any) -> Status:
    try:
        return Status(value)
    except ValueError:
        allowed = ", ".join(s.value for s in Status)
        raise InvalidArgument(f"status: expected one of {allowed}, got {value!r}") from None


def statuses(values: Any) -> tuple[Status, ...]:
    if isinstance(values, (str, Status)):
        values = [values]
    if not isinstance(values, Iterable):
        raise InvalidArgument(f"statuses: expected a list of statuses, got {values!r}")
    return tuple(status(v) for v in values)


def tuples(items: Any, what: str, fields: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """``items`` as a list of tuples of ``len(fields)`` values: a list of reports, say
    ``(job_id, claim_id, result)``. A wrong shape is an ``InvalidArgument`` naming the
    item and what it should hold (never its values: a claim id is a secret), instead of
    the unpacking's ``TypeError`` or ``ValueError``."""
    shape = f"({', '.join(fields)})"
    if isinstance(items, str | bytes | dict) or not isinstance(items, Iterable):
        raise InvalidArgument(f"{what}: expected a list of {shape}, got {type(items).__name__}")
    out = list(items)
    size = len(fields)
    for n, item in enumerate(out):
        if not isinstance(item, tuple | list) or len(item) != size:
            got = f"{len(item)} values" if isinstance(item, tuple | list) else type(item).__name__
            raise InvalidArgument(f"{what}[{n}]: expected {shape}, got {got}")
    return out
