"""The options of a new job, declared once.

``EnqueueOptions`` is the keyword arguments that every way of adding a job takes beside
the task and its payload: ``Queue.enqueue``, ``AsyncQueue.enqueue``, the remote queues,
``Task.enqueue`` and ``Task.using`` (with ``typing.Unpack``). Each option carries its
``Option`` (what it means, its default, how it travels), from which ``OPTIONS`` is read:
the HTTP request models, the command line's flags and the fields of ``enqueue --file``
lines are built from that table, so an option added here reaches every one of them.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypedDict

from conveyor.ops.defaults import Duration

OnActive = Literal["return", "raise"]
OnFailed = Literal["new", "return", "retry"]
OnCompleted = Literal["new", "return"]
OnDependencyFailure = Literal["cancel", "run"]

# What an option's value is, for the checks of the HTTP API and the command line (the
# queue checks every value again whichever way it came).
Kind = Literal["name", "key", "int32", "time", "attempts", "job_ids", "seconds", "choice", "any"]


@dataclass(frozen=True, slots=True)
class Option:
    """One option of ``EnqueueOptions``.

    - ``help``: what it does (the API schema's description and the ``--help`` text).
    - ``default``: its value when left out.
    - ``kind``: what its values are (``"choice"``: one of ``choices``).
    - ``item``: an item of a batch (``enqueue_many``, ``POST /api/jobs/batch``, a line
      of ``enqueue --file``) may set it; otherwise only a single enqueue can.
    - ``local``: only a local database queue can take it (``conn``): neither the HTTP API
      nor the command line carries it.
    - ``wire``: its name in an HTTP body, when not the option's own.
    - ``flags``: its command-line flags (default: ``--`` and the name with dashes).
    - ``metavar``: how ``--help`` names its value.
    """

    help: str
    default: Any = None
    kind: Kind = "any"
    item: bool = True
    local: bool = False
    wire: str | None = None
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    name: str = ""
    choices: tuple[str, ...] = ()

    @property
    def field(self) -> str:
        """The option's name in an HTTP body."""
        return self.wire or self.name

    @property
    def cli_flags(self) -> tuple[str, ...]:
        return self.flags or ("--" + self.name.replace("_", "-"),)


class EnqueueOptions(TypedDict, total=False):
    """The options of ``enqueue``; every one may be left out (see ``OPTIONS`` for the
    defaults)."""

    queue: Annotated[str, Option("Queue name.", "default", "name", flags=("--queue", "-q"))]
    key: Annotated[
        str | None,
        Option("Dedupe key: one active job per key (see the dedupe policy).", kind="key",
               flags=("--key", "-k")),
    ]  # fmt: skip
    priority: Annotated[int, Option("Lower runs first.", 0, "int32")]
    run_at: Annotated[
        datetime | None,
        Option("Not before this time (ISO 8601, with a UTC offset).", kind="time",
               metavar="TIME"),
    ]  # fmt: skip
    max_attempts: Annotated[
        int | None,
        Option("Attempts before it fails for good (default: the queue's).", kind="attempts",
               metavar="N"),
    ]  # fmt: skip
    subscriber: Annotated[
        str | None,
        Option("Who is told when the job finishes (see conveyor.notify).", kind="name"),
    ]
    group: Annotated[str | None, Option("Its concurrency group.", kind="name")]
    after: Annotated[
        Iterable[int] | None,
        Option("Ids of jobs it runs after (once they completed).", kind="job_ids",
               metavar="IDS"),
    ]  # fmt: skip
    on_dependency_failure: Annotated[
        OnDependencyFailure,
        Option("A job it runs after failed or was cancelled: cancel it, or run it.", "cancel",
               "choice"),
    ]  # fmt: skip
    on_active: Annotated[
        OnActive,
        Option("An active job has the key: return it, or raise (HTTP 409).", "return",
               "choice", item=False),
    ]  # fmt: skip
    cache_ttl: Annotated[
        Duration | None,
        Option("Reuse the key's job completed less than this long ago.", kind="seconds",
               item=False, wire="cache_ttl_seconds", metavar="DURATION"),
    ]  # fmt: skip
    on_failed: Annotated[
        OnFailed,
        Option("The key's latest job failed: enqueue a new one, return it, or retry it.",
               "new", "choice", item=False),
    ]  # fmt: skip
    on_completed: Annotated[
        OnCompleted,
        Option("The key's latest job completed: enqueue a new one, or return it.", "new",
               "choice", item=False),
    ]  # fmt: skip
    conn: Annotated[
        Any,
        Option("The caller's open connection: the job commits with their work.",
               item=False, local=True),
    ]  # fmt: skip


def _table() -> dict[str, Option]:
    hints = typing.get_type_hints(EnqueueOptions, include_extras=True)
    table: dict[str, Option] = {}
    for name, hint in hints.items():
        (option,) = [m for m in hint.__metadata__ if isinstance(m, Option)]
        choices: tuple[str, ...] = ()
        if option.kind == "choice":
            choices = typing.get_args(typing.get_args(hint)[0])
        table[name] = Option(
            option.help, option.default, option.kind, option.item, option.local,
            option.wire, option.flags, option.metavar, name, choices,
        )  # fmt: skip
    return table


OPTIONS: Mapping[str, Option] = _table()
"""Every option of ``EnqueueOptions`` by name, in declaration order."""

# A batch item's fields: the task, its payload, and the options an item may set.
ITEM_FIELDS = frozenset({"task", "payload", *(n for n, o in OPTIONS.items() if o.item)})


def unknown(options: Mapping[str, Any]) -> list[str]:
    """The names in ``options`` that are no option."""
    return [name for name in options if name not in OPTIONS]


_DEFAULTS: Mapping[str, Any] = MappingProxyType({n: o.default for n, o in OPTIONS.items()})


def resolved(options: Mapping[str, Any], where: str = "enqueue()") -> Mapping[str, Any]:
    """Every option, those left out at their default (read-only). A name that is no
    option is refused as Python refuses an unknown keyword argument."""
    if not options:
        return _DEFAULTS  # the usual call: every enqueue passes here
    if not OPTIONS.keys() >= options.keys():
        raise TypeError(f"{where} got an unexpected keyword argument {unknown(options)[0]!r}")
    return {**_DEFAULTS, **options}


__all__ = [
    "ITEM_FIELDS",
    "OPTIONS",
    "EnqueueOptions",
    "OnActive",
    "OnCompleted",
    "OnDependencyFailure",
    "OnFailed",
    "Option",
]
