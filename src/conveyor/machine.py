"""The job state machine, written once.

``TRANSITIONS`` is the table: every operation that changes a job's state, the states
it may start from, the state it leads to, what else must hold and what else changes.
The rest of conveyor reads it:

- every driver's guarded writes name their expected states through it (the SQL
  dialects expand ``{from_<transition>}`` to the table's source states, so a guard
  cannot drift from the table);
- refusals (``InvalidTransition``) say what was expected in the table's words;
- docs/state-machine.md holds ``markdown_table()``, checked by a test, as are the
  schema's CHECK constraints and ``Status``.

The *decisions* are here too, as pure functions: what a failure leads to, what an
expired lease leads to (and the error it leaves), and how long a failed notification
waits before it is offered again. Drivers only carry out the guarded writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from conveyor.job import Status
from conveyor.retry import Backoff

PENDING, RUNNING = Status.PENDING, Status.RUNNING
COMPLETED, FAILED, CANCELLED = Status.COMPLETED, Status.FAILED, Status.CANCELLED
FINAL = (COMPLETED, FAILED, CANCELLED)

_CLAIM_FIELDS = "claim_id, claimed_at, worker, heartbeat_at, lease_expires_at"


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of the table. ``name`` is how code refers to it (``{from_<name>}`` in
    SQL); ``label`` how the docs name the operation."""

    name: str
    label: str
    sources: tuple[Status, ...]
    target: Status | None  # None: the row is deleted
    guard: str = ""
    changes: str = ""
    verb: str = ""  # "cannot <verb> job N"; defaults to the name
    requires: str = ""  # what a refusal adds to the expected states

    @property
    def expected(self) -> str:
        """The source states in words: "pending or running"."""
        names = [str(s) for s in self.sources]
        words = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return f"{words}, {self.requires}" if self.requires else words


TRANSITIONS: tuple[Transition, ...] = (
    Transition(
        "enqueue", "`enqueue`", (), PENDING,
        "no active job with the same `(queue, key)` (a unique index)",
        "`run_at` = given time or now",
    ),
    Transition(
        "claim", "`claim`", (PENDING,), RUNNING,
        "`run_at ≤ now`, dependencies met (`waiting_for = 0`), the queue not paused and "
        "within its limits; picked by priority, then id",
        "`attempts + 1`, new `claim_id`, `worker`, `claimed_at`, `started_at`, "
        "`lease_expires_at = now + lease`",
    ),
    Transition(
        "claim_job", "`claim_job(id)`", (PENDING,), RUNNING,
        "that job, dependencies met (pause and limits do not apply: the caller chose it)",
        "as `claim`", verb="claim", requires="with its dependencies met",
    ),
    Transition(
        "heartbeat", "`heartbeat`, `progress`", (RUNNING,), RUNNING,
        "the claim id still holds the job",
        "`lease_expires_at` moves on; progress fields (absolute values)",
        verb="heartbeat",
    ),
    Transition(
        "complete", "`complete`", (RUNNING,), COMPLETED,
        "the claim id still holds the job",
        "`result`, `finished_at`; `error` cleared (`errors` keeps the history)",
    ),
    Transition(
        "ack", "`ack(claim)`", (RUNNING,), COMPLETED,
        "the job belongs to that claim", "`finished_at`",
    ),
    Transition(
        "fail_retry", "`fail`, retryable, `attempts < max_attempts`", (RUNNING,), PENDING,
        "the claim id still holds the job",
        "`error`, `error_kind = retryable`, one more entry in `errors`, "
        "`run_at = now + backoff`; claim fields cleared",
        verb="fail",
    ),
    Transition(
        "fail_final", "`fail`, terminal or `attempts = max_attempts`", (RUNNING,), FAILED,
        "the claim id still holds the job",
        "`error`, `error_kind`, one more entry in `errors`, `finished_at`; claim fields "
        "kept, for the record",
        verb="fail",
    ),
    Transition(
        "snooze", "`snooze(delay)`", (RUNNING,), PENDING,
        "the claim id still holds the job",
        "`run_at = now + delay` (no delay keeps a `run_at` already past), `attempts - 1` "
        "(waiting is not a failure); claim fields cleared",
    ),
    Transition(
        "recover_retry", "`recover` (optionally of some queues and tasks), attempts left",
        (RUNNING,), PENDING, "`lease_expires_at < now`",
        "`error = \"lease expired: worker … stopped renewing its claim …\"`, one more entry "
        "in `errors`; claim fields cleared. Also done by an enqueue with the job's key and "
        "by a read of the job, so a dead worker's job never holds its key",
        verb="recover",
    ),
    Transition(
        "recover_final", "`recover`, attempts spent", (RUNNING,), FAILED,
        "`lease_expires_at < now`", "as above, and `finished_at`", verb="recover",
    ),
    Transition(
        "release", "`release(claim)` (optionally of some queues)", (RUNNING,), PENDING,
        "the job belongs to that claim", "claim fields cleared; attempts kept",
    ),
    Transition(
        "release_job", "`release_job(id)`", (RUNNING,), PENDING,
        "", "as `release`, for one job whoever holds it", verb="release",
    ),
    Transition(
        "reset_claims", "`reset_claims(older_than)` (optionally of some queues and tasks)",
        (RUNNING,), PENDING, "`claimed_at ≤ now - older_than`",
        "claim fields cleared; attempts kept",
    ),
    Transition(
        "cancel", "`cancel`", (PENDING, RUNNING), CANCELLED,
        "", "`finished_at`; a running job keeps its claim id, but its worker's writes are "
        "refused from now on",
    ),
    Transition(
        "cancel_for_dependency", "a dependency failed or was cancelled", (PENDING,),
        CANCELLED,
        "the job runs after it with `on_dependency_failure=\"cancel\"` (the default)",
        "`error = \"dependency job N failed\"`; the same for the job's own dependents, in "
        "the same statement",
        verb="cancel",
    ),
    Transition(
        "complete_by_key", "`complete_by_key`", (PENDING, RUNNING), COMPLETED,
        "the job has that key",
        "`result`, `finished_at`; `error` cleared (the work was done elsewhere)",
        verb="complete",
    ),
    Transition(
        "cancel_by_key", "`cancel_by_key`", (PENDING, RUNNING), CANCELLED,
        "the job has that key", "as `cancel`, for every active job with the key",
        verb="cancel",
    ),
    Transition(
        "fail_by_key", "`fail_by_key(error)`", (PENDING, RUNNING), FAILED,
        "the job has that key",
        "`error`, `error_kind = terminal`, one more entry in `errors`, `finished_at`; no "
        "retry. A running job keeps its claim id, but its worker's writes are refused from "
        "now on",
        verb="fail",
    ),
    Transition(
        "complete_failed_by_key", "`complete_by_key(include_failed=True)`", (FAILED,),
        COMPLETED, "the job has that key", "as `complete_by_key`: reconciliation",
        verb="complete",
    ),
    Transition(
        "retry", "`retry`", FINAL, PENDING,
        "no other active job has its key",
        "`attempts = 0`, `run_at = now`; `result`, `finished_at` and claim fields cleared",
    ),
    Transition(
        "retry_within_attempts", "`retry(reset_attempts=False)`", (FAILED, CANCELLED),
        PENDING, "`attempts < max_attempts`, no other active job has its key",
        "as `retry`, but `attempts` kept: retries within the job's budget", verb="retry",
    ),
    Transition(
        "prune", "`prune`", FINAL, None, "`finished_at ≤ now - older_than`",
        "the row and its subscribers are gone",
    ),
    Transition(
        "run_now", "`run_now(id)`, `run_now_all`", (PENDING,), PENDING,
        "", "`run_at` = now when it was later (a scheduled job, or one waiting to retry); "
        "dependencies still apply", verb="run",
    ),
    Transition(
        "delete", "`delete_job(id)`", FINAL, None, "",
        "the row, its subscribers and its dependency edges are gone (cancel an active "
        "job first)",
    ),
)  # fmt: skip

BY_NAME: dict[str, Transition] = {t.name: t for t in TRANSITIONS}


def transition(name: str) -> Transition:
    return BY_NAME[name]


def sources(*names: str) -> tuple[Status, ...]:
    """The states the named transitions start from, in the order of ``Status``."""
    found = {s for n in names for s in BY_NAME[n].sources}
    return tuple(s for s in Status if s in found)


def refusal(job: int, name: str, found: str, *, verb: str | None = None) -> str:
    """Why a guarded write of transition ``name`` changed nothing, the job being in
    state ``found``. ``verb`` names the caller's operation when it is not the table's."""
    t = BY_NAME[name]
    doing = verb or t.verb or t.name
    return f"cannot {doing} job {job}: expected status {t.expected}, found {found}"


# -- decisions ------------------------------------------------------------------------
def after_failure(*, retryable: bool, attempts: int, max_attempts: int) -> Transition:
    """A failure with attempts left goes back to pending (after a delay); a terminal
    one, or the last attempt's, is final."""
    if retryable and attempts < max_attempts:
        return BY_NAME["fail_retry"]
    return BY_NAME["fail_final"]


def after_lease_expired(*, attempts: int, max_attempts: int) -> Transition:
    """A job whose worker stopped renewing its lease runs again while attempts remain."""
    if attempts < max_attempts:
        return BY_NAME["recover_retry"]
    return BY_NAME["recover_final"]


def lease_expired_error(worker: str | None, attempts: int, max_attempts: int) -> str:
    """The error a recovered job carries (and its attempt history, without the count)."""
    return f"{lease_expired_cause(worker)} (attempt {attempts} of {max_attempts})"


def lease_expired_cause(worker: str | None) -> str:
    return f"lease expired: worker {worker or '?'} stopped renewing its claim"


@dataclass(frozen=True, slots=True)
class Redelivery:
    """What becomes of a notification that could not be delivered."""

    delay_s: float  # offered again after this long
    give_up: bool  # counts as told (the error kept) instead


def after_failed_delivery(
    *, attempts: int, base_s: float, cap_s: float, max_attempts: int
) -> Redelivery:
    """``attempts``: failed deliveries before this one. The delay doubles per attempt
    from ``base_s``, capped at ``cap_s``; the ``max_attempts``-th failure gives up."""
    delay = Backoff(base=base_s, factor=2.0, cap=cap_s, jitter=0.0).delay(attempts + 1)
    return Redelivery(delay_s=delay, give_up=attempts + 1 >= max_attempts)


# -- the SQL side -----------------------------------------------------------------------
def sql_states(states: Iterable[Status]) -> str:
    """``('pending', 'running')``: a list for ``status IN …``."""
    return "(" + ", ".join(f"'{s}'" for s in states) + ")"


def sql_macros() -> dict[str, str]:
    """``{from_<transition>}`` for every transition: its source states as an SQL list."""
    return {f"from_{t.name}": sql_states(t.sources) for t in TRANSITIONS if t.sources}


# -- the docs ---------------------------------------------------------------------------
def markdown_table() -> str:
    """The transitions table of docs/state-machine.md."""
    lines = [
        "| operation | from | to | guard | what else changes |",
        "|---|---|---|---|---|",
    ]
    for t in TRANSITIONS:
        src = ", ".join(f"`{s}`" for s in t.sources)
        dst = "(deleted)" if t.target is None else f"`{t.target}`"
        lines.append(f"| {t.label} | {src} | {dst} | {t.guard} | {t.changes} |")
    return "\n".join(lines) + "\n"
