"""Hearing other connections' commits to a SQLite file, for ``wait_for_change``.

``PRAGMA data_version`` on a connection of its own moves whenever another connection
commits. Reading it every few milliseconds would cost an idle process about a percent
of a core in wake-ups alone, so on Linux the watcher sleeps on inotify until the WAL
file is written, then reads the value every couple of milliseconds until the commit
shows (its frames are written before it is fsynced and published) or the file falls
quiet. Elsewhere, or when inotify is unavailable, it reads the value on a timer."""

from __future__ import annotations

import ctypes
import os
import select
import sys

# Without a file event, the value is still read this often (a missed event costs this).
QUIET_CHECK = 0.25
# After a write to the WAL file, the value is read this often, for this long.
HOT_INTERVAL = 0.002
HOT_FOR = 0.2
# Without inotify: how often the value is read.
POLL_INTERVAL = 0.005

_IN_MODIFY = 0x00000002


class FileWatch:
    """inotify on one file: ``wait`` returns True once the file was written."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def open(cls, path: str) -> FileWatch | None:
        """A watch on ``path``, or None where inotify is not to be had."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        if libc.inotify_add_watch(fd, os.fsencode(path), _IN_MODIFY) < 0:
            os.close(fd)
            return None
        return cls(fd)

    def wait(self, timeout: float) -> bool:
        """Block until the file is written (True) or ``timeout`` passes (False)."""
        readable, _, _ = select.select([self._fd], [], [], timeout)
        if not readable:
            return False
        try:
            while os.read(self._fd, 4096):  # drain: one wake-up per burst of writes
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        os.close(self._fd)
