"""When slots fall: cron expressions in a time zone across daylight-saving changes,
fixed periods counted from the epoch, and which slots a pass owes (no database)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conveyor import ConfigurationError
from conveyor.schedule import Cron, Every, due, format_period, timing

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def at(moment: datetime, seconds: float) -> datetime:
    return moment + timedelta(seconds=seconds)


def slots(t: Cron | Every, start: datetime, count: int) -> list[datetime]:
    found, moment = [], start
    for _ in range(count):
        nxt = t.next_after(moment)
        assert nxt is not None
        found.append(nxt)
        moment = nxt
    return found


def test_every_counts_from_the_epoch_so_all_workers_agree() -> None:
    t = timing(None, timedelta(seconds=30), None)
    assert isinstance(t, Every) and t.spec == "every 30s"
    assert t.next_after(utc(2030, 1, 1, 12, 0, 10)) == utc(2030, 1, 1, 12, 0, 30)
    assert t.next_after(utc(2030, 1, 1, 12, 0, 30)) == utc(2030, 1, 1, 12, 1)  # strictly after
    assert t.latest_at_or_before(utc(2030, 1, 1, 12, 0, 30)) == utc(2030, 1, 1, 12, 0, 30)
    assert t.latest_at_or_before(utc(2030, 1, 1, 12, 0, 29)) == utc(2030, 1, 1, 12)
    hourly = timing(None, 3600, None)
    assert hourly.next_after(utc(2030, 1, 1, 12, 59, 59)) == utc(2030, 1, 1, 13)
    assert format_period(timedelta(days=1, hours=2, seconds=1.5)) == "1d2h1.5s"
    assert format_period(timedelta(minutes=90)) == "1h30m"


def test_cron_in_utc_and_its_macros() -> None:
    t = timing("*/5 * * * *", None, None)
    assert isinstance(t, Cron) and t.spec == "*/5 * * * * (UTC)"
    assert slots(t, utc(2030, 1, 1, 12, 3), 3) == [
        utc(2030, 1, 1, 12, 5), utc(2030, 1, 1, 12, 10), utc(2030, 1, 1, 12, 15)
    ]  # fmt: skip
    assert t.latest_at_or_before(utc(2030, 1, 1, 12, 10)) == utc(2030, 1, 1, 12, 10)
    assert t.latest_at_or_before(utc(2030, 1, 1, 12, 9, 59, 999000)) == utc(2030, 1, 1, 12, 5)
    daily = timing("@daily", None, "Europe/Paris")
    assert daily.spec == "0 0 * * * (Europe/Paris)"
    assert daily.next_after(utc(2030, 1, 1, 12)) == utc(2030, 1, 1, 23)  # midnight in Paris
    assert timing("  0   3 * * MON ", None, None).spec == "0 3 * * MON (UTC)"


def test_a_fixed_time_runs_once_on_both_daylight_saving_days() -> None:
    nightly = timing("30 2 * * *", None, "Europe/Paris")
    # 2025-03-30: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that night.
    assert slots(nightly, utc(2025, 3, 28, 12), 3) == [
        utc(2025, 3, 29, 1, 30),  # 02:30 CET
        utc(2025, 3, 30, 1, 0),  # run as the clock jumps past 02:30 (03:00 CEST)
        utc(2025, 3, 31, 0, 30),  # 02:30 CEST
    ]
    # 2025-10-26: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice, runs once.
    assert slots(nightly, utc(2025, 10, 25, 12), 2) == [
        utc(2025, 10, 26, 0, 30),  # the first 02:30 (CEST)
        utc(2025, 10, 27, 1, 30),
    ]
    # Asked from inside the repeated hour, after the first 02:30: not again that day.
    second_0215 = datetime(2025, 10, 26, 2, 15, fold=1, tzinfo=PARIS)
    assert nightly.next_after(second_0215.astimezone(UTC)) == utc(2025, 10, 27, 1, 30)
    assert nightly.latest_at_or_before(utc(2025, 10, 26, 1, 15)) == utc(2025, 10, 26, 0, 30)


def test_frequent_cron_follows_real_time_through_daylight_saving() -> None:
    hourly = timing("0 * * * *", None, "Europe/Paris")
    found = slots(hourly, utc(2025, 10, 25, 23, 30), 4)
    assert found == [utc(2025, 10, 26, h) for h in range(4)]  # 02:00 CEST and 02:00 CET
    spring = slots(hourly, utc(2025, 3, 29, 23, 30), 3)
    assert spring == [utc(2025, 3, 30, h) for h in range(3)]  # no 02:00 that night
    every_30 = slots(timing("*/30 * * * *", None, "Europe/Paris"), utc(2025, 10, 25, 23, 50), 6)
    assert {b - a for a, b in itertools.pairwise(every_30)} == {timedelta(minutes=30)}


def test_slots_on_time_are_all_owed_and_older_ones_were_missed() -> None:
    t = timing(None, timedelta(seconds=2), None)  # grace: 5 s
    last = utc(2030, 1, 1, 12)
    now = utc(2030, 1, 1, 12, 0, 4, 500000)
    assert due(t, "run_once", last, now).run == [at(last, 2), at(last, 4)]
    assert due(t, "run_once", utc(2030, 1, 1, 12, 0, 4), now).run == []
    # No worker ran for a minute: only the slots of the last 5 seconds are owed, and
    # the missed ones are covered by them.
    later = utc(2030, 1, 1, 12, 1, 0, 500000)
    on_time = due(t, "skip", last, later)
    assert on_time.run == [at(last, 56), at(last, 58), at(last, 60)]
    assert on_time.missed == at(last, 54)


def test_a_missed_slot_runs_once_or_is_skipped() -> None:
    nightly = timing("0 3 * * *", None, None)  # grace: one minute
    last = utc(2030, 1, 1, 3)
    three_days_later = utc(2030, 1, 4, 9)
    once = due(nightly, "run_once", last, three_days_later)
    assert once.run == [utc(2030, 1, 4, 3)] and once.missed == utc(2030, 1, 4, 3)
    skipped = due(nightly, "skip", last, three_days_later)
    assert skipped.run == [] and skipped.missed == utc(2030, 1, 4, 3)
    # Forty seconds late is not missed: the slot is simply owed.
    assert due(nightly, "skip", last, utc(2030, 1, 2, 3, 0, 40)).run == [utc(2030, 1, 2, 3)]
    # A schedule with no slot taken yet owes nothing from before the grace.
    assert due(nightly, "run_once", None, three_days_later).run == []


@pytest.mark.parametrize(
    ("cron", "every", "tz", "message"),
    [
        (None, None, None, "either cron= or every="),
        ("* * * * *", 60, None, "either cron= or every="),
        ("*/5 * * *", None, None, "five fields"),
        ("* * * * * *", None, None, "five fields"),
        ("61 * * * *", None, None, "bad minute"),
        ("0 0 31 2 *", None, None, "day-of-month"),
        ("x", None, None, "five fields"),
        (5, None, None, "expected a string"),
        ("* * * * *", None, "Mars/Olympus", "time zone"),
        ("* * * * *", None, "../etc/passwd", "time zone"),
        ("* * * * *", None, 2, "time zone"),
        (None, 0, None, "1 second"),
        (None, -5, None, "1 second"),
        (None, timedelta(milliseconds=500), None, "1 second"),
        (None, timedelta(days=400), None, "366 days"),
        (None, float("nan"), None, "timedelta or a number"),
        (None, "30s", None, "timedelta or a number"),
        (None, timedelta(seconds=1, microseconds=1), None, "milliseconds"),
        (None, 60, "Europe/Paris", "tz= applies to cron="),
    ],
)
def test_bad_timings_are_refused(cron: object, every: object, tz: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        timing(cron, every, tz)


EXPRESSIONS = ["30 2 * * *", "0 * * * *", "*/7 * * * *", "15 1-3 * * *", "0 2 * * SUN",
               "59 1 * * *", "0 0 L * *", "*/30 0-4 * * *"]  # fmt: skip
DST_DAYS = [utc(2025, 3, 9), utc(2025, 3, 30), utc(2025, 4, 6), utc(2025, 10, 5),
            utc(2025, 10, 26), utc(2025, 11, 2)]  # fmt: skip
ZONES = ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]


@settings(max_examples=300, deadline=None)
@given(
    expr=st.sampled_from(EXPRESSIONS),
    zone=st.sampled_from(ZONES),
    # Moments around the 2025 daylight-saving changes of these zones, and anywhere.
    moment=st.one_of(
        st.builds(
            lambda day, s: day + timedelta(seconds=s),
            st.sampled_from(DST_DAYS),
            st.integers(-86_400, 2 * 86_400),
        ),
        st.datetimes(datetime(2000, 1, 1), datetime(2060, 1, 1), timezones=st.just(UTC)),
    ),
)
def test_slots_move_forward_and_agree_both_ways(expr: str, zone: str, moment: datetime) -> None:
    cron = timing(expr, None, zone)
    after = cron.next_after(moment)
    assert after is not None and after > moment
    before = cron.latest_at_or_before(moment)
    assert before is not None and before <= moment
    # Nothing lies between the slot before and the slot after.
    assert cron.next_after(before) == after
    assert cron.latest_at_or_before(after) == after
    assert cron.latest_at_or_before(after - timedelta(milliseconds=1)) == before
