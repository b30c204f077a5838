"""What every route needs, kept on ``app.state.conveyor``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from conveyor.job import Job
from conveyor.queue import Queue
from conveyor.web.auth import Tokens
from conveyor.web.limits import Limits
from conveyor.web.metrics import Metrics


@dataclass(frozen=True, slots=True)
class ServerState:
    queue: Queue
    tokens: Tokens
    limits: Limits
    metrics: Metrics


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.conveyor
    return state


State = Annotated[ServerState, Depends(_state)]


def job_out(job: Job) -> dict[str, object]:
    """A job as the API returns it (validated against ``JobOut`` by the route)."""
    return job.to_dict()
