"""The task pool: runs claimed jobs' task functions, at most ``slots`` at once, in the
order they were claimed; jobs claimed ahead of a free slot (prefetched) wait here.

Synchronous functions run on reusable pool threads, coroutines on one event-loop
thread. When a run ends, the thread that ran it starts the next waiting job itself, so
a stream of short tasks costs no hand-off between threads: a pool thread goes straight
on to the next sync job, the event loop to the next coroutine.

Pool threads start on demand and are kept (starting a thread per job cost more than a
short task). They are daemons: a sync function that never returns cannot keep the
process alive after shutdown (Python cannot interrupt a running thread; see
docs/worker.md)."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from conveyor.worker import invoke
from conveyor.worker.classify import from_exception
from conveyor.worker.held import Held
from conveyor.worker.outcome import Outcome

# Called when a run ends; None when it never ran or was cancelled (the claim was gone).
OnEnded = Callable[[Held, Outcome | None], None]


class Run:
    __slots__ = ("held", "prepared")

    def __init__(self, held: Held, prepared: invoke.Prepared) -> None:
        self.held = held
        self.prepared = prepared


class TaskPool:
    def __init__(self, on_ended: OnEnded, *, slots: int) -> None:
        self._on_ended = on_ended
        self._slots = slots
        self._lock = threading.Lock()
        self._waiting: deque[Run] = deque()  # claimed, not started: in claim order
        self._running = 0  # slots taken
        self._threads: list[threading.Thread] = []
        self._to_threads: queue.SimpleQueue[Run | None] = queue.SimpleQueue()
        self._handed = 0  # runs handed to pool threads that none has taken yet
        self._idle = 0  # pool threads waiting for a run
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- what the worker calls ------------------------------------------------------
    def submit(self, runs: Iterable[Run]) -> None:
        """Queue claimed jobs; as many start now as there are free slots."""
        with self._lock:
            self._waiting.extend(runs)
            starting = self._take_startable()
        self._launch(starting)

    @property
    def waiting(self) -> int:
        """Jobs claimed and not yet started."""
        return len(self._waiting)

    def take_waiting(self) -> list[Held]:
        """Remove every job still waiting for a slot (on stop): they will not start."""
        with self._lock:
            runs = list(self._waiting)
            self._waiting.clear()
        return [r.held for r in runs]

    def close(self) -> None:
        """Let idle pool threads end, and stop the event loop (coroutines still pending
        are abandoned with it). A thread still running a task ends when the task does."""
        with self._lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
            threads, self._threads = self._threads, []
        for _ in threads:
            self._to_threads.put(None)
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=2.0)
            if not thread.is_alive():
                loop.close()

    # -- slots ----------------------------------------------------------------------
    def _take_startable(self) -> list[Run]:
        """Under the lock: the waiting runs that free slots can take now."""
        starting = []
        while self._waiting and self._running < self._slots:
            self._running += 1
            starting.append(self._waiting.popleft())
        return starting

    def _slot_freed(self) -> list[Run]:
        with self._lock:
            self._running -= 1
            return self._take_startable()

    def _launch(self, runs: list[Run]) -> None:
        coroutines = [r for r in runs if r.prepared.task.is_async]
        if coroutines:
            loop = self._event_loop()
            loop.call_soon_threadsafe(self._start_coroutines, coroutines)
        for run in runs:
            if not run.prepared.task.is_async:
                self._hand_to_thread(run)

    def _begin(self, run: Run) -> bool:
        """Mark ``run`` started; False (and it is ended, unrun) if its claim is gone."""
        held = run.held
        if held.ctx.cancelled:  # lost or timed out while it waited for a slot
            self._on_ended(held, None)
            return False
        timeout = run.prepared.task.timeout
        if timeout is not None:  # a task's timeout runs from its start, not its claim
            held.deadline = time.monotonic() + timeout
        held.started_at = datetime.now(UTC)
        held.started = True
        return True

    # -- sync functions: pool threads ----------------------------------------------
    def _hand_to_thread(self, run: Run) -> None:
        with self._lock:
            self._handed += 1
            if self._handed > self._idle and len(self._threads) < self._slots:
                thread = threading.Thread(
                    target=self._pool_thread,
                    name=f"conveyor-task-{len(self._threads) + 1}",
                    daemon=True,
                )
                self._threads.append(thread)
                thread.start()
        self._to_threads.put(run)

    def _pool_thread(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            run = self._to_threads.get()
            with self._lock:
                self._idle -= 1
                if run is not None:
                    self._handed -= 1
            if run is None:
                return
            next_run: Run | None = run
            while next_run is not None:
                self._run_sync(next_run)
                next_run = None
                for started in self._slot_freed():
                    if next_run is None and not started.prepared.task.is_async:
                        next_run = started  # this thread runs it: no hand-off
                    else:
                        self._launch([started])

    def _run_sync(self, run: Run) -> None:
        if not self._begin(run):
            return
        ending: Outcome | None = None
        try:
            ending = invoke.call(run.prepared, run.held.ctx)
        except BaseException as exc:  # SystemExit and the like, raised by task code
            ending = from_exception(run.held.job, exc, backoff=run.prepared.backoff)
        finally:
            self._on_ended(run.held, ending)

    # -- coroutines: one event loop -------------------------------------------------
    def _start_coroutines(self, runs: list[Run]) -> None:
        loop = asyncio.get_running_loop()
        for run in runs:
            task = loop.create_task(self._run_async(run))
            self._tasks.add(task)  # the loop keeps only a weak reference
            task.add_done_callback(self._tasks.discard)

    async def _run_async(self, run: Run) -> None:
        try:
            if not self._begin(run):
                return
            # Set once running: a task cancelled before its first step would skip these
            # finally clauses. Called from the heartbeater: Task.cancel is not thread-safe.
            task, loop = asyncio.current_task(), asyncio.get_running_loop()
            if task is not None:
                run.held.cancel = lambda: loop.call_soon_threadsafe(task.cancel)
            ending: Outcome | None = None
            try:
                ending = await invoke.call_async(run.prepared, run.held.ctx)
            except asyncio.CancelledError:
                ending = None  # cancelled because the claim is gone: nothing to write
            except BaseException as exc:
                ending = from_exception(run.held.job, exc, backoff=run.prepared.backoff)
            finally:
                self._on_ended(run.held, ending)
        finally:
            started = self._slot_freed()
            coroutines = [r for r in started if r.prepared.task.is_async]
            if coroutines:
                self._start_coroutines(coroutines)  # on this loop, no hand-off
            for r in started:
                if not r.prepared.task.is_async:
                    self._hand_to_thread(r)

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
