"""Writers of one SQLite file take turns in the kernel, not in SQLite's busy handler.

SQLite has one write lock per file. A connection that finds it taken sleeps and tries
again, 1, 2, 5, 10 … ms later (its busy handler), so when several processes write, the
lock often lies free while every waiter sleeps: four workers draining one file kept it
busy about half the time. Here each write transaction first takes an exclusive
``flock`` on a file beside the database (``<database>-writers``); a waiter blocks in
the kernel (on a thread of the driver's, so that it can give up on time) and is woken
the moment the holder lets go, so the lock passes from one writer to the next without
a gap.

The turn only orders conveyor's own writers: SQLite's lock still guards every write,
so a writer that does not take turns (an application's own connection) is as safe as
before, and a file that cannot be made (a read-only folder) just leaves the busy
handler in charge. The kernel drops a killed process's ``flock``. A writer waits for
its turn up to the busy timeout, as it would for SQLite's lock, then is told the
database is busy.

Every driver of the process on the same file shares one turn, reentrant per thread,
so a write made through a second queue inside another's transaction meets SQLite's
busy timeout as before instead of waiting on itself. A forked child opens queues of its
own (SQLite's connections must not cross a fork either); where ``flock`` is not to be
had (Windows), there are no turns."""

from __future__ import annotations

import os
import threading

try:
    import fcntl
except ImportError:  # not POSIX: SQLite's busy handler alone
    fcntl = None  # type: ignore[assignment]

SUFFIX = "-writers"

_made: dict[tuple[int, str], WriterTurn] = {}  # (process, file): a fork makes its own
_making = threading.Lock()


class WriterTurn:
    """The turn to write one file, for this process: ``take(timeout)`` and ``give()``,
    reentrant per thread. ``take`` answers False when the turn did not come within
    ``timeout`` seconds (the caller says the database is busy, as SQLite would)."""

    def __init__(self, key: tuple[int, str], fd: int) -> None:
        self._key = key
        self._fd = fd
        self._lock = threading.RLock()  # this process's threads queue here first
        self._depth = 0
        self._users = 0  # drivers holding this turn (its file is closed after the last)
        # The kernel's wait has no time limit: a waiter that must give up hands it to a
        # thread of its own, which lets the turn go at once if it comes too late.
        self._state = threading.Condition(threading.Lock())
        self._wanted = False  # a waiter asks the taker for the turn
        self._granted = False  # the taker has it, for that waiter
        self._taking = False  # the taker is in the kernel's wait
        self._taker: threading.Thread | None = None

    def take(self, timeout: float) -> bool:
        if not self._lock.acquire(timeout=max(timeout, 0.0)):
            return False
        self._depth += 1
        if self._depth > 1 or self._fd < 0:  # (-1: its last driver closed meanwhile)
            return True
        try:
            if not self._taking:  # (else a given-up wait is still in the kernel: join it)
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return True
                except BlockingIOError:
                    pass
            if self._wait(timeout):
                return True
        except BaseException:
            self._untake()
            raise
        self._untake()
        return False

    def give(self) -> None:
        try:
            if self._depth == 1 and self._fd >= 0:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._untake()

    def _untake(self) -> None:
        self._depth -= 1
        self._lock.release()

    def _wait(self, timeout: float) -> bool:
        """Another process holds the turn: the taker waits for it in the kernel."""
        with self._state:
            if self._taker is None:
                self._taker = threading.Thread(
                    target=self._take_for_waiters, name="conveyor-sqlite-turn", daemon=True
                )
                self._taker.start()
            self._granted, self._wanted = False, True
            self._state.notify_all()
            self._state.wait_for(lambda: self._granted, timeout)
            got, self._granted, self._wanted = self._granted, False, False
            return got

    def _take_for_waiters(self) -> None:
        while True:
            with self._state:
                self._state.wait_for(lambda: self._wanted or self._fd < 0)
                fd, self._taking = self._fd, True
            if fd < 0:
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # the file was closed: nobody waits any more
                return
            with self._state:
                self._taking = False
                if self._wanted:
                    self._granted, self._wanted = True, False
                    self._state.notify_all()
                    continue
            fcntl.flock(fd, fcntl.LOCK_UN)  # its waiter gave up meanwhile

    def release(self) -> None:
        """A driver that took this turn closes: the last one closes its file."""
        with _making:
            self._users -= 1
            if self._users == 0:
                del _made[self._key]
                fd, self._fd = self._fd, -1
                os.close(fd)
        with self._state:  # a taker waiting for a waiter ends
            self._state.notify_all()


def turn_for(path: str) -> WriterTurn | None:
    """The turn for the database file at ``path`` (hand it back with ``release``);
    None for a private database (``:memory:``, a ``file:`` URI) or where the turn's
    file cannot be opened."""
    if fcntl is None or path == ":memory:" or path.startswith("file:"):
        return None
    key = (os.getpid(), os.path.realpath(path))
    with _making:
        turn = _made.get(key)
        if turn is None:
            try:
                fd = os.open(key[1] + SUFFIX, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError:
                return None
            turn = _made[key] = WriterTurn(key, fd)
        turn._users += 1
        return turn
