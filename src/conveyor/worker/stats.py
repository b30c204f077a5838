"""What a worker did, counted as it goes (read them any time from another thread)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields


@dataclass
class WorkerStats:
    claimed: int = 0
    completed: int = 0  # endings written: completed
    failed: int = 0  # failed for good
    retried: int = 0  # failed, back to pending for another attempt
    snoozed: int = 0  # back to pending for later, no attempt spent (the task raised Snooze)
    stale_refused: int = 0  # endings the claim guard refused: someone else holds the job
    uncertain: int = 0  # refusals after a connection error (maybe our own earlier write)
    leases_lost: int = 0  # running tasks told their claim was gone
    timeouts: int = 0
    released: int = 0  # given back to pending at shutdown
    db_errors: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_lock"}

    def summary(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.as_dict().items() if v)
