"""What every route needs, kept on ``app.state.conveyor``."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from conveyor.queue import Queue
from conveyor.web.auth import Tokens
from conveyor.web.backoff import TokenBackoff
from conveyor.web.limits import Limits
from conveyor.web.metrics import Metrics


class Registrants:
    """Which token registered each worker entry through this server (a digest of it,
    never the token), so that a worker token refreshes and removes only the entries it
    registered. Bounded: past ``max_names`` the stalest are forgotten."""

    def __init__(self, max_names: int = 100_000) -> None:
        self.max_names = max_names
        self._owners: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def digest(token: str) -> bytes:
        return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()

    def owner(self, name: str) -> bytes | None:
        with self._lock:
            return self._owners.get(name)

    def record(self, name: str, owner: bytes) -> None:
        with self._lock:
            self._owners.pop(name, None)
            self._owners[name] = owner
            while len(self._owners) > self.max_names:
                self._owners.popitem(last=False)

    def forget(self, name: str) -> None:
        with self._lock:
            self._owners.pop(name, None)


@dataclass(slots=True)
class Waits:
    """Long polls under way. Only the event loop touches it: no lock."""

    active: int = 0


@dataclass(frozen=True, slots=True)
class ServerState:
    queue: Queue
    tokens: Tokens
    limits: Limits
    metrics: Metrics
    backoff: TokenBackoff = field(default_factory=TokenBackoff)
    waits: Waits = field(default_factory=Waits)
    registrants: Registrants = field(default_factory=Registrants)


async def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.conveyor
    return state


State = Annotated[ServerState, Depends(_state)]
