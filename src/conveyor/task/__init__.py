"""What task authors use: the ``Context`` a task receives, and how a task's arguments
become a job's payload and back. Light to import: the worker runtime is elsewhere
(``conveyor.worker``)."""

from conveyor.task.binding import Binding, PayloadMismatch
from conveyor.task.context import Context

__all__ = ["Binding", "Context", "PayloadMismatch"]
