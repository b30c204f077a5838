"""The exceptions conveyor raises. They form one family::

    ConveyorError
    ├── JobNotFound          no job has that id (or no claim has that id)
    │   └── WorkflowNotFound no workflow run has that id
    ├── StaleClaim           the claim named no longer holds the job; nothing was written
    ├── InvalidTransition    the job is not in a state that allows the operation
    ├── DuplicateJob         an active job already has the key and no dedupe was asked for
    ├── InvalidArgument      bad input, refused before anything was written (also ValueError)
    │   └── IdempotencyKeyReused  an Idempotency-Key sent again with another request
    ├── RequestInProgress    the request that holds an Idempotency-Key has not answered yet
    ├── ConfigurationError   bad URL, option or environment (also ValueError)
    └── DatabaseError        the database failed or could not be reached (its
        │                    ``outcome_unknown`` says a write may have landed anyway)
        ├── TransactionConflict  a deadlock or a lock wait broken by the database;
        │                        nothing was written, running it again may work
        ├── DatabaseUnavailable  the database cannot be reached (down, restarting,
        │                        connection lost); nothing was written, unless the
        │                        connection was lost during a commit
        ├── StorageFull          the database's disk (or its size limit) is full;
        │                        nothing was written
        └── StorageReadOnly      the database only accepts reads; nothing was written,
                                 unless its disk failed during a commit's fsync

The control exceptions that task code raises (``Retry``, ``Terminal``, ``Snooze``) are
not errors of the library: they live in ``conveyor.control``.
"""

from __future__ import annotations


class ConveyorError(Exception):
    """Something went wrong in conveyor."""

    code = "conveyor_error"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip())

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class JobNotFound(ConveyorError):
    """No job with that id exists."""

    code = "not_found"


class WorkflowNotFound(JobNotFound):
    """No workflow run with that id exists."""

    code = "workflow_not_found"


class StaleClaim(ConveyorError):
    """The claim no longer holds this job: it was reset, expired or re-claimed."""

    code = "stale_claim"


class InvalidTransition(ConveyorError):
    """The job's state does not allow this operation."""

    code = "invalid_transition"


class DuplicateJob(ConveyorError):
    """An active job with this key already exists."""

    code = "duplicate_job"

    def __init__(self, message: str | None = None, *, job_id: int | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


class InvalidArgument(ConveyorError, ValueError):
    """An argument was invalid; nothing was written."""

    code = "invalid_argument"


class TooManySubscribers(InvalidArgument):
    """The job has as many subscribers as a job takes; nothing was written."""

    code = "too_many_subscribers"


class IdempotencyKeyReused(InvalidArgument):
    """The Idempotency-Key was used before with another request (method, path or body);
    nothing was written."""

    code = "idempotency_key_reused"


class RequestInProgress(ConveyorError):
    """Another request with the same Idempotency-Key has not answered yet; ask again
    shortly to get its answer."""

    code = "idempotency_request_in_progress"


class ConfigurationError(ConveyorError, ValueError):
    """The configuration (URL, options) is invalid."""

    code = "configuration_error"


class DatabaseError(ConveyorError):
    """The database reported an error or could not be reached.

    ``outcome_unknown`` is true when the failure came after the database may already
    have made the write durable, so it may be there despite the error: SQLite's disk
    failing during the fsync of a commit (the WAL then holds the committed frames, and
    the next open recovers them). Running such a write again is safe for conveyor's
    guarded state changes; for an enqueue, give the job a ``key`` (or, over HTTP, send
    an ``Idempotency-Key``, as the remote queue does) so a repeat finds the first."""

    code = "database_error"

    def __init__(self, message: str | None = None, *, outcome_unknown: bool = False) -> None:
        super().__init__(message)
        self.outcome_unknown = outcome_unknown


class TransactionConflict(DatabaseError):
    """The database broke a deadlock by rolling the transaction back (MySQL error 1213),
    or gave up waiting for a lock (1205, which undoes the statement). Nothing of the
    operation was written, so running it again is safe: a queue does so itself for its
    own transactions; inside the caller's transaction (``conn=``) the caller decides."""

    code = "transaction_conflict"


class DatabaseUnavailable(DatabaseError):
    """The database cannot be reached: it is down, restarting, or the connection was
    lost. The operation was not written, unless the connection was lost during its
    commit: the driver cannot tell that from a loss before it, so a write that raises
    this may be there (as for ``outcome_unknown``; conveyor's guarded state changes are
    safe to run again, an enqueue is with a ``key``). Retry later: a queue reconnects by
    itself once the database is back."""

    code = "database_unavailable"


class StorageFull(DatabaseError):
    """The database has no room left: its disk is full, or it reached a size limit
    (SQLite's ``max_page_count``, a MySQL table size). Nothing of the operation was
    written; what was acknowledged before stays. Retry once space is freed."""

    code = "storage_full"


class StorageReadOnly(DatabaseError):
    """The database accepts reads only (a read-only file, a read-only server or
    transaction mode, a standby). Nothing of the operation was written, unless
    ``outcome_unknown`` says the file system failed while the commit was being made
    durable. Retry once it accepts writes again."""

    code = "storage_read_only"
