"""Running jobs in the calling thread, one at a time: ``app.drain()`` and immediate mode.

No heartbeats, no timeouts, no signals: this is for tests and scripts, where the code
under test should run the same task functions through the same claim and fencing path
as a worker, without threads."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from conveyor.maintenance.notifications import Dispatcher
from conveyor.task import Context
from conveyor.worker import completer, invoke
from conveyor.worker.outcome import Outcome

if TYPE_CHECKING:
    from conveyor.worker.host import WorkerApp

T = TypeVar("T")


def drain(app: WorkerApp, queues: Sequence[str]) -> int:
    """Claim and run jobs of ``queues`` until none is claimable; return how many ran."""
    q = app.queue
    ran = 0
    while True:
        claimed = 0
        for name in queues:
            for job in q.claim(name, limit=1, count_remaining=False).jobs:
                claimed += 1
                prepared = invoke.prepare(app, job)
                if isinstance(prepared, Outcome):
                    ending = prepared
                else:
                    ctx = Context(job, q)
                    if prepared.task.is_async:
                        ending = run_coroutine(invoke.call_async(prepared, ctx))
                    else:
                        ending = invoke.call(prepared, ctx)
                completer.write(q, [ending])
        told = 0
        if app.notifier is not None:
            # Announcements may be jobs themselves (webhooks): go round again for them.
            told = Dispatcher(q, app.notifier).run_once()
        if not claimed and not told:
            return ran
        ran += claimed


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to the end, also when called from inside a running event loop
    (an async test): then on a fresh loop in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(asyncio.run(coro))
        except BaseException as exc:
            errors.append(exc)

    helper = threading.Thread(target=target, name="conveyor-inline", daemon=True)
    helper.start()
    helper.join()
    if errors:
        raise errors[0]
    return box[0]
