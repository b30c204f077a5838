"""How a database dialect stores conveyor's values, and how its rows become ``Job``
objects. Shared by the synchronous and asynchronous backends of a dialect."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from conveyor.job import AttemptError, ErrorKind, Job, Progress, Status

Row = Mapping[str, Any]

_STATUSES = {status.value: status for status in Status}
_ERROR_KINDS = {kind.value: kind for kind in ErrorKind}
_NO_PROGRESS = Progress()


class Values(ABC):
    dialect: ClassVar[str]

    @abstractmethod
    def encode_time(self, value: datetime) -> Any:
        """A UTC datetime as the database stores it (also inside JSON parameters)."""

    @abstractmethod
    def decode_time(self, value: Any) -> datetime | None: ...

    @abstractmethod
    def decode_json(self, value: Any) -> Any: ...

    def decode_job(self, row: Row, *, deduplicated: bool = False) -> Job:
        # Hot path: every claimed and completed job passes here, so NULLs skip the
        # decoders and a job without progress shares one empty Progress.
        t = self.decode_time
        j = self.decode_json
        total, done = row["progress_total"], row["progress_completed"]
        failed, current = row["progress_failed"], row["progress_current"]
        checkpoint, detail = row["progress_checkpoint"], row["progress_detail"]
        if (total is None and done is None and failed is None and current is None
                and checkpoint is None and detail is None):  # fmt: skip
            progress = _NO_PROGRESS
        else:
            progress = Progress(
                total=total,
                completed=done,
                failed=failed,
                current=None if current is None else j(current),
                checkpoint=None if checkpoint is None else j(checkpoint),
                detail=None if detail is None else j(detail),
            )
        payload, result, kind = row["payload"], row["result"], row["error_kind"]
        deps, errors = row["depends_on"], row["errors"]
        claimed_at, lease, beat = row["claimed_at"], row["lease_expires_at"], row["heartbeat_at"]
        started_at, finished_at = row["started_at"], row["finished_at"]
        return Job(
            id=row["id"],
            queue=row["queue"],
            task=row["task"],
            payload=None if payload is None else j(payload),
            key=row["key"],
            status=_STATUSES[row["status"]],
            priority=row["priority"],
            run_at=t(row["run_at"]),  # type: ignore[arg-type]
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            claim_id=row["claim_id"],
            claimed_at=None if claimed_at is None else t(claimed_at),
            lease_expires_at=None if lease is None else t(lease),
            heartbeat_at=None if beat is None else t(beat),
            worker=row["worker"],
            progress=progress,
            result=None if result is None else j(result),
            error=row["error"],
            error_kind=_ERROR_KINDS[kind] if kind else None,
            created_at=t(row["created_at"]),  # type: ignore[arg-type]
            started_at=None if started_at is None else t(started_at),
            finished_at=None if finished_at is None else t(finished_at),
            updated_at=t(row["updated_at"]),  # type: ignore[arg-type]
            group=row["job_group"],
            depends_on=() if deps is None else tuple(j(deps)),
            waiting_for=row["waiting_for"],
            errors=() if errors is None else self._attempt_errors(j(errors)),
            deduplicated=deduplicated,
        )

    def _attempt_errors(self, entries: list[dict[str, Any]]) -> tuple[AttemptError, ...]:
        return tuple(
            AttemptError(
                attempt=int(e["attempt"]),
                error=e["error"] or "",
                kind=_ERROR_KINDS.get(e["kind"], ErrorKind.RETRYABLE),
                at=self._json_time(e["at"]),
                worker=e.get("worker"),
            )
            for e in entries
        )

    def _json_time(self, value: Any) -> datetime:
        """A time stored inside JSON: epoch seconds (SQLite) or ISO 8601 (PostgreSQL)."""
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        decoded = self.decode_time(value)
        assert decoded is not None
        return decoded

    @staticmethod
    def json_param(items: Any) -> str:
        return json.dumps(items, separators=(",", ":"), ensure_ascii=False)
