"""How jobs leave the server: what a caller may see of them, and how much one answer
may carry.

- A claim id is a secret of its holder. A job goes out with ``claim_id`` null unless
  the request itself named that claim (the claimant's own claim, a report under it);
  everyone sees ``claim_ref`` instead, a fingerprint that groups the jobs of one claim
  and from which the claim id cannot be recovered.
- Lists leave out ``payload`` and ``result`` unless asked (``include``).
- An answer holding many jobs has a byte budget (``Limits.max_response_bytes``): the
  first job always goes in; ``budgeted`` says where the budget ran out.

Answers are rendered here, in the route's worker thread, rather than by the framework
on the event loop."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.responses import Response

from conveyor import crypto
from conveyor.errors import InvalidArgument
from conveyor.job import Job

INCLUDABLE = ("payload", "result")
EVERYTHING = frozenset(INCLUDABLE)
NOTHING: frozenset[str] = frozenset()


def claim_ref(claim_id: str | None) -> str | None:
    """A non-secret fingerprint of a claim id: 12 hex digits of its SHA-256. Claim ids
    are 128-bit random values, so the fingerprint tells nothing that would rebuild one."""
    if claim_id is None:
        return None
    digest = hashlib.sha256(b"conveyor claim ref\0" + _raw(claim_id)).hexdigest()
    return digest[:12]


def job_json(
    job: Job, *, holder: str | None = None, include: frozenset[str] = EVERYTHING
) -> dict[str, Any]:
    """A job as the API shows it: ``claim_id`` only to ``holder``, the claim it names."""
    holds = bool(holder and job.claim_id and hmac.compare_digest(_raw(job.claim_id), _raw(holder)))
    # Only the claim's holder (a worker) sees the fields its task redacts.
    data = (job if holds else crypto.redacted(job)).to_dict()
    data["claim_ref"] = claim_ref(job.claim_id)
    if not holds:
        data["claim_id"] = None
    for field in INCLUDABLE:
        if field not in include:
            del data[field]
    return data


def parse_include(value: str | None) -> frozenset[str]:
    """``"payload,result"`` -> the fields asked for; unknown names are refused."""
    if value is None:
        return NOTHING
    names = {part.strip() for part in value.split(",") if part.strip()}
    unknown = names - EVERYTHING
    if unknown:
        raise InvalidArgument(
            f"include: expected a comma-separated list of {', '.join(INCLUDABLE)}, "
            f"got {', '.join(sorted(unknown))}"
        )
    return frozenset(names)


def dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class JSONBytes(Response):
    """JSON already rendered."""

    media_type = "application/json"


def answer(data: Any, status_code: int = 200) -> Response:
    return JSONBytes(dumps(data), status_code=status_code)


def job_answer(job: Job, *, holder: str | None = None, status_code: int = 200) -> Response:
    return answer(job_json(job, holder=holder), status_code)


class Budget:
    """Collects rendered jobs until ``max_bytes`` would be passed (the first always
    fits). ``add`` says whether the job went in."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.parts: list[bytes] = []
        self.size = 0
        self.spent = False

    def add(self, data: Mapping[str, Any]) -> bool:
        encoded = dumps(data)
        if self.parts and self.size + len(encoded) > self.max_bytes:
            self.spent = True
            return False
        self.parts.append(encoded)
        self.size += len(encoded)
        return True

    @property
    def room(self) -> int:
        return max(0, self.max_bytes - self.size)

    def render(self, key: str = "jobs", **fields: Any) -> Response:
        """``{key: [...], "truncated": …, **fields}``."""
        head = dumps({**fields, "truncated": self.spent})
        body = b"".join([b'{"', key.encode(), b'":[', b",".join(self.parts), b"],", head[1:]])
        return JSONBytes(body)


def budgeted(
    jobs: Iterable[Job], max_bytes: int, *, holder: Mapping[int, str] | str | None = None
) -> tuple[Budget, list[Job]]:
    """Whole jobs into a budget, in order, until it is spent; returns the budget and the
    jobs that did not fit."""
    budget = Budget(max_bytes)
    left: list[Job] = []
    for job in jobs:
        if left or not budget.add(job_json(job, holder=_holder(holder, job))):
            left.append(job)
    return budget, left


def trimmed(
    jobs: Iterable[Job], max_bytes: int, *, holder: Mapping[int, str] | str | None = None
) -> Budget:
    """Every job into a budget: once it is spent, jobs go in without their payload and
    result (for answers that must name every job they changed)."""
    budget = Budget(max_bytes)
    for job in jobs:
        data = job_json(job, holder=_holder(holder, job))
        if budget.spent or not budget.add(data):
            slim = {k: v for k, v in data.items() if k not in INCLUDABLE}
            budget.parts.append(dumps(slim))
    return budget


def _holder(holder: Mapping[int, str] | str | None, job: Job) -> str | None:
    if holder is None or isinstance(holder, str):
        return holder
    return holder.get(job.id)


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
