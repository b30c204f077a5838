"""Throwaway database servers, each in a temporary directory on a free port, that a
test may stop and start at will (never the shared servers other tests use).

PostgreSQL from ``initdb`` and ``pg_ctl``; MariaDB (or MySQL) from ``mariadb-install-db``
and ``mariadbd``. Both run as their system user when the tests run as root (neither
server starts as root). Without the binaries the tests that need them skip, except under
``CI=true``, where they fail."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import pytest

from tests.conftest import IN_CI


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _require(problem: str | None) -> None:
    if problem is None:
        return
    if IN_CI:
        pytest.fail(f"{problem} (CI=true: the database fault tests must run)")
    pytest.skip(problem)


def _as_user(name: str) -> list[str]:
    """The prefix that runs a command as ``name`` when we are root."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", name, "--"]


def _own_directory(prefix: str, user: str) -> Path:
    """A new directory for a server's files, owned by the user it runs as. Made right
    under the system's temporary directory: a test's own ``tmp_path`` sits below a
    directory only its owner may enter."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def _wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


class ThrowawayPostgres:
    """A PostgreSQL cluster of its own: ``url``, ``stop(mode)``, ``start()``."""

    name = "PostgreSQL"

    def __init__(self) -> None:
        self.root = root = _own_directory("conveyor-pg-", "postgres")
        self.data = root / "pgdata"
        self.port = free_port()
        self.log = root / "postgres.log"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._bin = self.binaries()

    @staticmethod
    def binaries() -> Path | None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if found:
            return Path(found[-1]).parent
        pg_ctl = shutil.which("pg_ctl")
        return Path(pg_ctl).parent if pg_ctl else None

    @classmethod
    def require(cls) -> None:
        problem = None
        if cls.binaries() is None:
            problem = "PostgreSQL's initdb/pg_ctl are not installed"
        elif os.geteuid() == 0 and not _user_exists("postgres"):
            problem = "running as root without a 'postgres' user to run PostgreSQL as"
        _require(problem)

    def _run(self, *args: str, timeout: float = 60) -> None:
        assert self._bin is not None
        command = [*_as_user("postgres"), str(self._bin / args[0]), *args[1:]]
        done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stderr.decode(errors='replace')}")

    def create(self) -> ThrowawayPostgres:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\nfsync = off\n"
                "max_connections = 100\nshared_buffers = 32MB\n"
            )
        self.start()
        return self

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast`` (connections are told and closed) or ``immediate`` (a crash: no
        checkpoint, recovery at the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def set(self, setting: str, value: str) -> None:
        """Change a setting for every new session, without a restart."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET {setting} = {value}")
            conn.execute("SELECT pg_reload_conf()")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with suppress(subprocess.SubprocessError, RuntimeError):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class ThrowawayMariaDB:
    """A MariaDB server of its own: ``url``, ``stop(mode)``, ``start()``."""

    name = "MariaDB"

    def __init__(self) -> None:
        self.root = root = _own_directory("conveyor-mariadb-", "mysql")
        self.data = root / "data"
        self.port = free_port()
        self.socket = root / "mysqld.sock"
        self.log = root / "mariadb.log"
        self.url = f"mysql://root@127.0.0.1:{self.port}/conveyor"
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binaries() -> tuple[str, str] | None:
        install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        server = (
            shutil.which("mariadbd")
            or shutil.which("mysqld")
            or next(
                (p for p in ("/usr/sbin/mariadbd", "/usr/sbin/mysqld") if os.path.exists(p)), None
            )
        )
        return (install, server) if install and server else None

    @classmethod
    def require(cls) -> None:
        problem = None
        if cls.binaries() is None:
            problem = "MariaDB's mariadb-install-db/mariadbd are not installed"
        elif os.geteuid() == 0 and not _user_exists("mysql"):
            problem = "running as root without a 'mysql' user to run MariaDB as"
        _require(problem)

    def create(self) -> ThrowawayMariaDB:
        found = self.binaries()
        assert found is not None
        install, _ = found
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        done = subprocess.run(
            [install, f"--datadir={self.data}", "--auth-root-authentication-method=normal",
             "--skip-test-db", *user],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {done.stderr.decode(errors='replace')}")
        self.start()
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE conveyor CHARACTER SET utf8mb4")
            # Over TCP root would be root@localhost only through the socket: allow it.
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
            cur.execute("GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        conn.close()
        return self

    def start(self) -> None:
        found = self.binaries()
        assert found is not None
        _, server = found
        user = ["--user=mysql"] if os.geteuid() == 0 else []
        command = [
            server, "--no-defaults", f"--datadir={self.data}", f"--socket={self.socket}",
            f"--port={self.port}", "--bind-address=127.0.0.1", f"--log-error={self.log}",
            f"--pid-file={self.root / 'mysqld.pid'}", "--innodb-buffer-pool-size=32M",
            "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2",
            "--skip-name-resolve", "--max-connections=200", *user,
        ]  # fmt: skip
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not _wait_port(self.port, 60):
            raise RuntimeError(f"MariaDB did not start; see {self.log}")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: SIGTERM, a clean shutdown; ``immediate``: SIGKILL, a crash."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL if mode == "immediate" else signal.SIGTERM)
        self.proc.wait(60)
        self.proc = None

    def set(self, setting: str, value: str) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True)
        with conn.cursor() as cur:
            cur.execute(f"SET GLOBAL {setting} = {value}")
        conn.close()

    def add_user(self, name: str) -> str:
        """A user with every privilege on the conveyor database, none on the server
        (no READ ONLY ADMIN: ``read_only`` binds it); its URL."""
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True)
        with conn.cursor() as cur:
            cur.execute(f"CREATE USER '{name}'@'127.0.0.1'")
            cur.execute(f"GRANT ALL ON conveyor.* TO '{name}'@'127.0.0.1'")
        conn.close()
        return self.url.replace("root@", f"{name}@")

    def destroy(self) -> None:
        if self.proc is not None:
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
