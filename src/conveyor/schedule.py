"""When periodic jobs are due: cron expressions in a time zone, or a fixed period, and
which slots a scheduler owes at a given moment. Pure functions of time, no database.

A *slot* is one moment a schedule fires, as a UTC ``datetime``. The slots of a schedule
are the same on every machine (cron in its zone; ``every`` counted from the Unix
epoch), so any number of workers agree on them without talking to each other; the
database decides which of them enqueues each one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from conveyor.errors import ConfigurationError

OnMissed = Literal["run_once", "skip"]
ON_MISSED: tuple[OnMissed, ...] = ("run_once", "skip")

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MIN_EVERY = timedelta(seconds=1)
MAX_EVERY = timedelta(days=366)
MAX_CRON_LENGTH = 200
# A slot not enqueued within this long of its time counts as missed (see ``grace``).
MIN_GRACE = timedelta(seconds=5)
MAX_GRACE = timedelta(minutes=1)
# At most this many slots are enqueued for one schedule in one pass.
MAX_CATCH_UP = 100

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class Cron:
    """Slots where a five-field cron expression (minute hour day-of-month month
    day-of-week) matches the wall clock of ``tz``. Across daylight-saving changes a
    job at a fixed time runs once: a time skipped in spring runs when the clock jumps
    past it, a time repeated in autumn runs the first time only; jobs that run every
    few minutes or hours follow real time."""

    expr: str
    tz: tzinfo

    @property
    def spec(self) -> str:
        return f"{self.expr} ({_zone_name(self.tz)})"

    @property
    def grace(self) -> timedelta:
        return MAX_GRACE

    def next_after(self, moment: datetime) -> datetime | None:
        """The first slot strictly after ``moment``, or None if there is none."""
        slots = CronSim(self.expr, moment.astimezone(self.tz))
        # Wall-clock evaluation can answer a time before ``moment`` inside a repeated
        # autumn hour: step on until the answer is really later.
        for _ in range(8):
            try:
                found = next(slots).astimezone(timezone.utc)
            except StopIteration:
                return None
            if found > moment:
                return found
        return None

    def latest_at_or_before(self, moment: datetime) -> datetime | None:
        """The last slot at or before ``moment``, or None if there is none."""
        # Backwards iteration starts strictly before the time given: a second past
        # ``moment`` (slots are whole seconds) includes a slot at ``moment`` itself.
        start = moment.replace(microsecond=0) + timedelta(seconds=1)
        slots = CronSim(self.expr, start.astimezone(self.tz), reverse=True)
        found = None
        for _ in range(8):
            try:
                found = next(slots).astimezone(timezone.utc)
            except StopIteration:
                return None
            if found <= moment:
                break
        if found is None or found > moment:
            return None
        # Wall-clock evaluation from inside a repeated autumn hour overlooks a slot that
        # fell in its first pass: step forward while a later slot is still not past.
        for _ in range(8):
            later = self.next_after(found)
            if later is None or later > moment:
                break
            found = later
        return found


@dataclass(frozen=True, slots=True)
class Every:
    """Slots every ``period``, counted from the Unix epoch in UTC: ``every=1h`` fires
    on the hour, ``every=30s`` on :00 and :30 of each minute."""

    period: timedelta

    @property
    def spec(self) -> str:
        return f"every {format_period(self.period)}"

    @property
    def grace(self) -> timedelta:
        return min(MAX_GRACE, max(MIN_GRACE, self.period))

    def next_after(self, moment: datetime) -> datetime:
        return EPOCH + ((moment - EPOCH) // self.period + 1) * self.period

    def latest_at_or_before(self, moment: datetime) -> datetime:
        return EPOCH + ((moment - EPOCH) // self.period) * self.period


Timing = Cron | Every


def timing(cron: Any, every: Any, tz: Any, *, what: str = "periodic") -> Timing:
    """The timing a declaration asks for; ``ConfigurationError`` when it makes no sense."""
    if (cron is None) == (every is None):
        raise ConfigurationError(f"{what}: give either cron= or every=, not both or neither")
    if every is not None:
        if tz is not None:
            raise ConfigurationError(
                f"{what}: tz= applies to cron= only (every= counts real time, in UTC)"
            )
        return Every(_period(every, what))
    zone = _zone(tz, what)
    if not isinstance(cron, str):
        raise ConfigurationError(f"{what}: cron: expected a string, got {type(cron).__name__}")
    expr = " ".join(cron.split())
    expr = MACROS.get(expr.lower(), expr)
    if not expr or len(expr) > MAX_CRON_LENGTH or len(expr.split()) != 5:
        raise ConfigurationError(
            f"{what}: cron: expected five fields (minute hour day-of-month month "
            f"day-of-week) or a macro such as @daily, got {cron!r}"
        )
    try:
        result = Cron(expr, zone)
        first = result.next_after(datetime.now(timezone.utc))
    except CronSimError as exc:
        raise ConfigurationError(f"{what}: cron {cron!r}: {str(exc).lower()}") from None
    if first is None:
        raise ConfigurationError(f"{what}: cron {cron!r} never matches")
    return result


def _period(every: Any, what: str) -> timedelta:
    if isinstance(every, timedelta):
        period = every
    elif isinstance(every, (int, float)) and not isinstance(every, bool) and every == every:
        if abs(every) > MAX_EVERY.total_seconds():
            raise ConfigurationError(f"{what}: every: expected at most 366 days, got {every}")
        period = timedelta(seconds=every)
    else:
        raise ConfigurationError(
            f"{what}: every: expected a timedelta or a number of seconds, got {every!r}"
        )
    if not MIN_EVERY <= period <= MAX_EVERY:
        raise ConfigurationError(
            f"{what}: every: expected from 1 second to 366 days, got {period.total_seconds():g}s"
        )
    if period % timedelta(milliseconds=1):
        raise ConfigurationError(f"{what}: every: expected whole milliseconds, got {period}")
    return period


def _zone(tz: Any, what: str) -> tzinfo:
    if tz is None:
        return timezone.utc
    if isinstance(tz, (ZoneInfo, timezone)):
        return tz
    if isinstance(tz, str):
        try:
            return ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    raise ConfigurationError(
        f"{what}: tz: expected a time zone name such as 'Europe/Paris', got {tz!r}"
    )


def _zone_name(tz: tzinfo) -> str:
    return getattr(tz, "key", None) or str(tz)


def format_period(period: timedelta) -> str:
    """``1d2h``, ``30s``, ``1.5s``: a period as a compact text."""
    ms = period // timedelta(milliseconds=1)
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)):
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    if ms or not parts:
        parts.append(f"{ms / 1000:g}s")
    return "".join(parts)


_SPEC_PERIOD = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_SPEC_UNIT = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_SPEC_CRON = re.compile(r"^(?P<expr>.+) \((?P<zone>[^()]+)\)$")


def from_spec(spec: str) -> Timing | None:
    """The timing a stored ``spec`` (``every 5m``, ``0 9 * * * (Europe/Paris)``) names,
    or None when it is not one this version writes."""
    if spec.startswith("every "):
        text = spec.removeprefix("every ")
        parts = _SPEC_PERIOD.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            return None
        total = sum(float(n) * _SPEC_UNIT[u] for n, u in parts)
        return Every(timedelta(seconds=total)) if total > 0 else None
    match = _SPEC_CRON.match(spec)
    if match is None:
        return None
    try:
        return timing(match["expr"], None, match["zone"])
    except ConfigurationError:
        return None


def last_run(spec: str, last_slot: datetime | None) -> datetime | None:
    """The slot a schedule last enqueued, or None if it never ran. A schedule is
    stored with the moment it was first declared as its last slot (the slots before it
    are not owed); that moment is not a slot of its timing, so it is no run."""
    if last_slot is None:
        return None
    found = from_spec(spec)
    if found is None:
        return last_slot
    return last_slot if found.latest_at_or_before(last_slot) == last_slot else None


@dataclass(frozen=True, slots=True)
class Periodic:
    """A periodic schedule as an app declares it: enqueue ``task`` with ``payload`` (its
    keyword arguments) on ``queue`` at every slot of ``timing``."""

    name: str
    task: str
    timing: Timing
    payload: dict[str, Any] | None = None
    queue: str = "default"
    priority: int = 0
    max_attempts: int | None = None
    on_missed: OnMissed = "run_once"

    @property
    def spec(self) -> str:
        return self.timing.spec

    def due(self, last: datetime | None, now: datetime) -> Due:
        return due(self.timing, self.on_missed, last, now)


def on_missed(value: Any, what: str = "periodic") -> OnMissed:
    for choice in ON_MISSED:
        if value == choice:
            return choice
    raise ConfigurationError(f"{what}: on_missed: expected 'run_once' or 'skip', got {value!r}")


@dataclass(frozen=True, slots=True)
class Due:
    """What one pass owes a schedule: ``run``, the slots to enqueue, oldest first; and
    ``missed``, the latest slot that went by unenqueued (run once or skipped)."""

    run: list[datetime] = field(default_factory=list)
    missed: datetime | None = None


def due(timing: Timing, on_missed: OnMissed, last: datetime | None, now: datetime) -> Due:
    """The slots owed at ``now`` after ``last`` (the last slot enqueued).

    Slots of the last ``grace`` (the period, from 5 seconds to a minute) are all owed:
    workers that run see to them within a second or so. An older slot was *missed*
    (no worker ran, or the database was unreachable): however many went by, the latest
    is enqueued once with ``on_missed="run_once"`` (unless a slot on time stands in for
    it), and none with ``"skip"``."""
    cutoff = now - timing.grace
    since = cutoff if last is None else max(last, cutoff)
    run: list[datetime] = []
    slot = timing.next_after(since)
    while slot is not None and slot <= now and len(run) < MAX_CATCH_UP:
        run.append(slot)
        slot = timing.next_after(slot)
    missed = None
    if last is not None and last < cutoff:
        latest = timing.latest_at_or_before(cutoff)
        if latest is not None and latest > last:
            missed = latest
    if not run and missed is not None and on_missed == "run_once":
        run = [missed]
    return Due(run, missed)
