"""Option parsing of ``conveyor worker`` (the command itself runs in test_processes)."""

from __future__ import annotations

import pytest

from conveyor.cli.worker import _retention
from conveyor.errors import ConfigurationError
from conveyor.maintenance import Retention


def test_retention_rules_read_status_equals_age() -> None:
    assert _retention([]) is None
    assert _retention(["completed=7d", "failed=90s", "cancelled=1.5h"]) == Retention(
        completed=7 * 86400, failed=90, cancelled=5400
    )
    assert _retention(["completed=30m"]) == Retention(completed=1800, failed=None, cancelled=None)


@pytest.mark.parametrize("rule", ["running=1d", "completed", "completed=soon", "completed=-1d"])
def test_bad_retention_rules_are_refused(rule: str) -> None:
    with pytest.raises(ConfigurationError, match="--retain"):
        _retention([rule])
