"""Where a SQLite queue runs out of room, and how room comes back: a small tmpfs mount
(a disk that fills up), or SQLite's ``max_page_count`` (the ``max_pages`` URL option),
the portable way, where mounting is not permitted. Either holds a *ballast* taken
before the run and freed to give the room back."""

from __future__ import annotations

import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

TMPFS_SIZE = "4m"
# In WAL mode what is written while the disk fills sits in the WAL file: to shrink it,
# a checkpoint first copies those pages into the database file, which needs about as
# much room again. The room that comes back must allow that, or the disk stays full.
TMPFS_BALLAST = 5 << 19  # 2.5 MiB
PAGES_BALLAST = 1 << 20
MAX_PAGES = 700  # 2.8 MB of 4 KiB pages, the ballast's 256 included


@dataclass
class SmallDisk:
    kind: str  # "tmpfs" or "max_pages"
    url: str
    path: Path  # the database file
    mount: Path | None = None

    def add_ballast(self) -> None:
        if self.kind == "tmpfs":
            (self.path.parent / "ballast").write_bytes(b"\0" * TMPFS_BALLAST)
            return
        with sqlite3.connect(self.path) as conn:
            conn.execute("CREATE TABLE ballast (b BLOB)")
            for _ in range(PAGES_BALLAST // 4096):
                conn.execute("INSERT INTO ballast VALUES (zeroblob(4000))")

    def free(self) -> None:
        """Give the ballast's room back: delete the file, or drop the table (its pages
        go to the database's free list, which writes use first)."""
        if self.kind == "tmpfs":
            (self.path.parent / "ballast").unlink()
            return
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            conn.execute("DROP TABLE ballast")
            conn.commit()
        finally:
            conn.close()

    def release(self) -> None:
        if self.mount is not None:
            subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, check=False)


def small_disk(kind: str, tmp: Path) -> SmallDisk:
    """A database with little room: on a tmpfs of ``TMPFS_SIZE`` when ``kind`` is
    ``tmpfs`` and mounting is permitted, else limited by ``max_pages``."""
    if kind == "tmpfs":
        mount = tmp / "small"
        mount.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount)],
            capture_output=True, check=False,
        )  # fmt: skip
        if done.returncode == 0:
            path = mount / "queue.db"
            return SmallDisk("tmpfs", f"sqlite:///{path}", path, mount)
    path = tmp / "queue.db"
    return SmallDisk("max_pages", f"sqlite:///{path}?max_pages={MAX_PAGES}", path)
