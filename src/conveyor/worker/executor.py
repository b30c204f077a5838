"""Starting task runs: each synchronous function on a thread of its own, coroutines on
one event-loop thread. The worker's slot count bounds how many run at once.

Threads are daemons: a sync function that never returns cannot keep the process alive
after shutdown (Python cannot interrupt a running thread; see docs/worker.md)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from conveyor.worker import execution, outcome
from conveyor.worker.outcome import Outcome
from conveyor.worker.registry import Held

log = logging.getLogger("conveyor.worker")

# Called when a run ends; None when an async run was cancelled (the claim was gone).
OnDone = Callable[[Held, Outcome | None], None]


class Executor:
    def __init__(self, on_done: OnDone) -> None:
        self._on_done = on_done
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self, held: Held, prepared: execution.Prepared) -> None:
        if prepared.task.is_async:
            loop = self._event_loop()
            future = asyncio.run_coroutine_threadsafe(self._run_async(held, prepared), loop)
            held.cancel = future.cancel
            if held.ctx.cancelled:  # lost before the handle existed
                future.cancel()
        else:
            name = f"conveyor-task-{held.job.id}"
            threading.Thread(
                target=self._run_sync, args=(held, prepared), name=name, daemon=True
            ).start()

    def _run_sync(self, held: Held, prepared: execution.Prepared) -> None:
        ending: Outcome | None = None
        try:
            ending = execution.call(prepared, held.ctx)
        except BaseException as exc:  # SystemExit and the like, raised by task code
            ending = outcome.from_exception(held.job, exc, backoff=prepared.backoff)
        finally:
            self._on_done(held, ending)

    async def _run_async(self, held: Held, prepared: execution.Prepared) -> None:
        ending: Outcome | None = None
        try:
            ending = await execution.call_async(prepared, held.ctx)
        except asyncio.CancelledError:
            ending = None  # cancelled because the claim is gone: nothing to write
        except BaseException as exc:
            ending = outcome.from_exception(held.job, exc, backoff=prepared.backoff)
        finally:
            self._on_done(held, ending)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="conveyor-async", daemon=True
                )
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def close(self) -> None:
        """Stop the event loop (coroutines still pending are abandoned with it)."""
        with self._lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=2.0)
            if not thread.is_alive():
                loop.close()
