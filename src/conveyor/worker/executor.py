"""Starting task runs: synchronous functions on a pool of reusable threads, coroutines
on one event-loop thread. The worker's slot count bounds how many run at once, and so
how many pool threads there ever are.

Pool threads start on demand and are kept: starting a thread per job cost more than a
short task itself. They are daemons: a sync function that never returns cannot keep the
process alive after shutdown (Python cannot interrupt a running thread; see
docs/worker.md)."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable

from conveyor.worker import execution, outcome
from conveyor.worker.outcome import Outcome
from conveyor.worker.registry import Held

log = logging.getLogger("conveyor.worker")

# Called when a run ends; None when an async run was cancelled (the claim was gone).
OnDone = Callable[[Held, Outcome | None], None]


class Executor:
    def __init__(self, on_done: OnDone, *, max_threads: int) -> None:
        self._on_done = on_done
        self._max_threads = max_threads
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._runs: queue.SimpleQueue[tuple[Held, execution.Prepared] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._waiting = 0  # runs handed over that no pool thread has taken yet
        self._idle = 0  # pool threads waiting for a run

    def start(self, held: Held, prepared: execution.Prepared) -> None:
        if prepared.task.is_async:
            loop = self._event_loop()
            future = asyncio.run_coroutine_threadsafe(self._run_async(held, prepared), loop)
            held.cancel = future.cancel
            if held.ctx.cancelled:  # lost before the handle existed
                future.cancel()
        else:
            with self._lock:
                self._waiting += 1
                if self._waiting > self._idle and len(self._threads) < self._max_threads:
                    thread = threading.Thread(
                        target=self._pool_thread,
                        name=f"conveyor-task-{len(self._threads) + 1}",
                        daemon=True,
                    )
                    self._threads.append(thread)
                    thread.start()
            self._runs.put((held, prepared))

    def _pool_thread(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            run = self._runs.get()
            with self._lock:
                self._idle -= 1
                if run is not None:
                    self._waiting -= 1
            if run is None:
                return
            self._run_sync(*run)

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
        """Let idle pool threads end, and stop the event loop (coroutines still pending
        are abandoned with it). A thread still running a task ends when the task does."""
        with self._lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
            threads, self._threads = self._threads, []
        for _ in threads:
            self._runs.put(None)
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=2.0)
            if not thread.is_alive():
                loop.close()
