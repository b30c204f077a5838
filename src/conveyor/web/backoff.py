"""Back-off for callers that offer wrong tokens, per client address, in bounded memory.

An address gets a few wrong guesses for free; after that each further one locks it out
for twice as long as the last (up to a cap), and while it is locked out no token it
sends is even looked at. A right token does not clear the record (a caller holding one
token would otherwise guess at the others without end, sending its own between
guesses): an address's failures are forgotten ``forget_after_seconds`` after its last
one. The address is the connection's peer, never a header, unless the server was told
to believe a proxy's ``X-Forwarded-For``. Only ``max_clients`` addresses are remembered
(the stalest are forgotten first), so a caller with many addresses costs memory it
cannot grow."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(slots=True)
class _Record:
    failures: int = 0
    last: float = 0.0
    locked_until: float = 0.0


class TokenBackoff:
    def __init__(
        self,
        *,
        free: int = 5,
        base_seconds: float = 1.0,
        cap_seconds: float = 60.0,
        forget_after_seconds: float = 900.0,
        max_clients: int = 10_000,
    ) -> None:
        self.free = free
        self.base = base_seconds
        self.cap = cap_seconds
        self.forget_after = forget_after_seconds
        self.max_clients = max_clients
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def locked_for(self, client: str, now: float | None = None) -> float:
        """Seconds ``client`` must still wait before a token of its is checked (0: none)."""
        record = self._records.get(client)
        if record is None:
            return 0.0
        moment = time.monotonic() if now is None else now
        return max(0.0, record.locked_until - moment)

    def failed(self, client: str, now: float | None = None) -> None:
        moment = time.monotonic() if now is None else now
        record = self._records.pop(client, None)
        if record is None or moment - record.last > self.forget_after:
            record = _Record()
        record.failures += 1
        record.last = moment
        past_free = record.failures - self.free
        if past_free > 0:
            delay = min(self.cap, self.base * 2 ** min(past_free - 1, 32))
            record.locked_until = moment + delay
        self._records[client] = record  # the most recent last
        while len(self._records) > self.max_clients:
            self._records.popitem(last=False)
