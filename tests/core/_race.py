"""Calls made at the same moment from threads, for tests of limits that must hold when
writers race for the last places."""

from __future__ import annotations

import threading
from collections.abc import Callable


def at_once(
    calls: list[Callable[[], object]], *, done: str, refused: type[Exception], says: str = ""
) -> list[str]:
    """Runs every call on its own thread, all released together; one outcome per call:
    ``done``, ``"refused"`` (``refused`` raised, its message holding ``says``), or the
    repr of anything else raised."""
    start = threading.Barrier(len(calls))
    outcomes: list[str] = []

    def run(call: Callable[[], object]) -> None:
        start.wait()
        try:
            call()
            outcomes.append(done)
        except refused as exc:
            outcomes.append("refused" if says in str(exc) else repr(exc))

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcomes
