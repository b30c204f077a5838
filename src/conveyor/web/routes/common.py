"""Pieces the route modules share: documented error responses and parameters."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from starlette.convertors import Convertor, StringConvertor, register_url_convertor

from conveyor.ops.defaults import MAX_JOB_ID
from conveyor.validation import MAX_KEY_LENGTH, MAX_NAME_LENGTH
from conveyor.web.models import _NO_CONTROL, ErrorOut

_DESCRIPTIONS = {
    400: "Malformed request (the body is not JSON)",
    401: "No valid bearer token",
    403: "The token's role does not allow this route",
    404: "No such job, or no such route",
    409: "Stale claim, invalid transition, an active job already has the key, or a request "
    "with the same Idempotency-Key has not answered yet",
    408: "The request body did not arrive in time",
    413: "Request body too large",
    415: "Request body is not JSON",
    422: "Invalid argument",
    429: "Too many wrong tokens from this address (Retry-After)",
    503: "The database is unavailable, or a server limit was reached (Retry-After)",
}
_EVERY_ROUTE = (400, 401, 403, 404, 408, 413, 415, 422, 429, 503)


def errors(*extra: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer with."""
    codes = sorted({*_EVERY_ROUTE, *extra})
    return {code: {"model": ErrorOut, "description": _DESCRIPTIONS[code]} for code in codes}


JobIdPath = Annotated[int, Path(ge=1, le=MAX_JOB_ID, description="the job's id")]
QueuePath = Annotated[
    str, Path(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL, description="queue")
]
ClaimIdPath = Annotated[str, Path(min_length=1, max_length=200, pattern=_NO_CONTROL)]
NamePath = Annotated[
    str, Path(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL, description="name")
]
QUEUE = Query(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL)
KEY = Query(min_length=1, max_length=MAX_KEY_LENGTH, pattern=_NO_CONTROL)
QueueQuery = Annotated[str | None, QUEUE]
TaskQuery = Annotated[
    str | None, Query(min_length=1, max_length=MAX_NAME_LENGTH, pattern=_NO_CONTROL)
]
QUEUES = Query(
    min_length=1,
    max_length=20_000,
    pattern=_NO_CONTROL,
    description="queue names, comma-separated (default: every queue)",
)
QueuesQuery = Annotated[str | None, QUEUES]
TASKS = Query(
    min_length=1,
    max_length=20_000,
    pattern=_NO_CONTROL,
    description="task names, comma-separated (default: every task)",
)
TasksQuery = Annotated[str | None, TASKS]


def queue_list(value: str | None) -> list[str] | None:
    return None if value is None else [name for name in value.split(",") if name]


KeyQuery = Annotated[str | None, KEY]
IncludeQuery = Annotated[
    str | None,
    Query(
        max_length=100,
        pattern=r"^(payload|result)(,(payload|result))*$",
        description="fields left out of lists unless named here: payload, result (comma list)",
    ),
]


class _JobIdConvertor(Convertor[int]):
    """A job id in a path: digits. Past 20 digits no job id can be meant: the value
    becomes one out of range (a 422 from the path's bounds), never handed to ``int``,
    which refuses texts over 4,300 digits with an error of its own."""

    regex = "[0-9]+"

    def convert(self, value: str) -> int:
        return int(value) if len(value) <= 20 else MAX_JOB_ID + 1

    def to_string(self, value: int) -> str:
        return str(value)


register_url_convertor("job_id", _JobIdConvertor())


class _ClaimIdConvertor(StringConvertor):
    """A claim id in a path: any segment but ``reset``, which names another resource
    (``POST /api/claims/reset``): ``DELETE /api/claims/reset`` must answer 405, not
    release a claim called "reset". Job ids use the ``int`` convertor for the same
    reason (``/api/jobs/batch``, ``/api/jobs/latest``)."""

    regex = r"(?!reset$)[^/]+"


register_url_convertor("claim_id", _ClaimIdConvertor())
