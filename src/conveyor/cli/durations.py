"""Durations and times as people type them: ``30s``, ``10m``, ``2h``, ``1d``, ``1h30m``,
a bare number of seconds, or an ISO 8601 time with its zone."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import typer

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_EXAMPLES = "30s, 10m, 2h, 1d or 1h30m"


def parse_duration(text: str, option: str = "--older-than") -> timedelta:
    """``"10m"`` -> ten minutes. A bare number counts seconds."""
    value = text.strip().lower()
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        if number < 0 or number != number or number == float("inf"):
            raise typer.BadParameter(
                f"expected a positive duration such as {_EXAMPLES}", param_hint=option
            )
        return timedelta(seconds=number)
    parts = _PART.findall(value)
    if not value or "".join(n + u for n, u in parts) != value:
        raise typer.BadParameter(
            f"expected a duration such as {_EXAMPLES}, got {text!r}", param_hint=option
        )
    try:
        return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in parts))
    except OverflowError:
        raise typer.BadParameter(f"duration {text!r} is too long", param_hint=option) from None


def parse_time(text: str, option: str = "--run-at") -> datetime:
    """An ISO 8601 time with a zone (``2030-01-01T09:00:00Z``, ``…+02:00``), as UTC.
    A time without a zone is refused rather than guessed: a wrong guess is hours off."""
    value = text.strip()
    if value.endswith(("z", "Z")):
        value = value[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(
            f"expected an ISO 8601 time such as 2030-01-01T09:00:00Z, got {text!r}",
            param_hint=option,
        ) from None
    if when.tzinfo is None:
        raise typer.BadParameter(
            f"expected a time with a zone (add Z for UTC, or +02:00), got {text!r}",
            param_hint=option,
        )
    try:
        return when.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-14:00 is past the last time UTC can hold
        raise typer.BadParameter(
            f"expected a time between years 1 and 9999 in UTC, got {text!r}", param_hint=option
        ) from None


def describe_duration(seconds: float) -> str:
    """A short, human form in at most two units: ``45s``, ``12m``, ``3h05m``, ``1d``."""
    s = int(abs(seconds))
    for big, small, size in (("d", "h", 86400), ("h", "m", 3600), ("m", "s", 60)):
        if s >= size:
            whole, rest = divmod(s, size)
            part = rest // (size // (24 if big == "d" else 60))
            return f"{whole}{big}{part:02d}{small}" if part and whole < 10 else f"{whole}{big}"
    return f"{s}s"
