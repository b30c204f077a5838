"""Where a SQLite queue runs out of room, and how room comes back: a small tmpfs mount
(a disk that fills up), or SQLite's ``max_page_count`` (the ``max_pages`` URL option),
the portable way, where mounting is not permitted. Either holds a *ballast* taken
before the run and freed to give the room back."""

from __future__ import annotations

import errno
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


@dataclass
class FailingDisk:
    """An ext4 file system on a loop device, mounted ``errors=remount-ro``: what a disk
    does when it fails under a running program. The kernel refuses to remount a file
    system read-only while files are open on it for writing (as a SQLite queue's are:
    ``mount -o remount,ro`` answers "busy"); after an error it turns it read-only itself,
    under the open files, and keeps it so until it is unmounted and checked."""

    image: Path
    device: str
    mount: Path

    def fail(self) -> None:
        """An ext4 error, as a bad sector would cause: the file system goes read-only."""
        trigger = Path("/sys/fs/ext4") / Path(self.device).name / "trigger_fs_error"
        trigger.write_text("conveyor fault test\n")

    def read_only(self) -> bool:
        """Whether a file can be created on it (the mount flags may not show an error's
        read-only state)."""
        try:
            (self.mount / "probe").touch()
        except OSError as exc:
            return exc.errno == errno.EROFS
        (self.mount / "probe").unlink()
        return False

    def repair(self) -> None:
        """What an operator does once every program let go of it: unmount, check, mount."""
        _run("umount", str(self.mount))
        subprocess.run(["e2fsck", "-fy", self.device], capture_output=True, check=False)
        _run("mount", "-o", "errors=remount-ro", self.device, str(self.mount))

    def release(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount)], capture_output=True, check=False)
        subprocess.run(["losetup", "-d", self.device], capture_output=True, check=False)


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=True)


def failing_disk(tmp: Path, size_mb: int = 64) -> FailingDisk | str:
    """A ``FailingDisk`` in ``tmp``, or why there cannot be one here."""
    image, mount = tmp / "disk.img", tmp / "disk"
    mount.mkdir()
    with image.open("wb") as f:
        f.truncate(size_mb << 20)
    try:
        _run("mkfs.ext4", "-q", "-F", "-O", "^has_journal", str(image))
        device = _run("losetup", "-f", "--show", str(image)).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"no loop device with ext4 here ({exc})"
    disk = FailingDisk(image, device, mount)
    try:
        _run("mount", "-o", "errors=remount-ro", device, str(mount))
    except subprocess.CalledProcessError as exc:
        subprocess.run(["losetup", "-d", device], capture_output=True, check=False)
        return f"mounting is not permitted here ({exc.stderr.strip()})"
    if not (Path("/sys/fs/ext4") / Path(device).name / "trigger_fs_error").exists():
        disk.release()
        return "this kernel cannot be told to fail an ext4 file system"
    return disk
