from __future__ import annotations

from datetime import timedelta

import pytest

from conveyor import Backoff, Fixed, InvalidArgument
from conveyor.retry import seconds


def test_backoff_without_jitter_doubles() -> None:
    policy = Backoff(base=2, jitter=0)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [2, 4, 8, 16]


def test_backoff_is_capped() -> None:
    assert Backoff(base=2, jitter=0, cap=10).delay(50) == 10
    assert Backoff(base=1, jitter=0).delay(10_000) == 3600  # no overflow on huge attempts


def test_jitter_spreads_within_bounds() -> None:
    policy = Backoff(base=10, jitter=0.5)
    assert policy.delay(1, rand=lambda: 0.0) == 5
    assert policy.delay(1, rand=lambda: 1.0) == 15
    assert policy.delay(1, rand=lambda: 0.5) == 10


def test_fixed_delay() -> None:
    assert Fixed(3).delay(1) == Fixed(3).delay(9) == 3


def test_bad_backoff_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        Backoff(factor=0.5)
    with pytest.raises(InvalidArgument):
        Backoff(jitter=2)


def test_durations() -> None:
    assert seconds(timedelta(minutes=2), "d") == 120
    assert seconds(1.5, "d") == 1.5
    for bad in (-1, float("nan"), float("inf"), "5", True, None, 10**12):
        with pytest.raises(InvalidArgument, match="^d: "):
            seconds(bad, "d")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="> 0"):
        seconds(0, "d", allow_zero=False)
