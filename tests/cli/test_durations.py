"""Durations and times as typed on the command line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import typer

from conveyor.cli.durations import describe_duration, parse_duration, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("10m", timedelta(minutes=10)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
        ("1.5h", timedelta(minutes=90)),
        ("45", timedelta(seconds=45)),
        (" 10M ", timedelta(minutes=10)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "ten minutes", "10 m", "-5", "5x", "m", "1h-2m", "nan"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_duration(text)


def test_times_need_a_zone_and_come_back_in_utc() -> None:
    assert parse_time("2030-01-01T09:00:00Z") == datetime(2030, 1, 1, 9, tzinfo=UTC)
    assert parse_time("2030-01-01T09:00:00+02:00") == datetime(2030, 1, 1, 7, tzinfo=UTC)
    with pytest.raises(typer.BadParameter, match="with a zone"):
        parse_time("2030-01-01T09:00:00")
    with pytest.raises(typer.BadParameter, match="ISO 8601"):
        parse_time("next tuesday")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59, "59s"), (60, "1m"), (65, "1m05s"), (3600, "1h"), (5400, "1h30m"),
     (86400, "1d"), (90000, "1d01h"), (12 * 86400, "12d"), (-90, "1m30s")],
)  # fmt: skip
def test_describe_duration(seconds: float, text: str) -> None:
    assert describe_duration(seconds) == text
