"""What every route needs, kept on ``app.state.conveyor``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from conveyor.queue import Queue
from conveyor.web.auth import Tokens
from conveyor.web.backoff import TokenBackoff
from conveyor.web.limits import Limits
from conveyor.web.metrics import Metrics


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


async def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.conveyor
    return state


State = Annotated[ServerState, Depends(_state)]
