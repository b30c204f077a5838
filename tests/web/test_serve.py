"""``conveyor serve`` as a user runs it: a real process, real HTTP."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conveyor.client import RemoteQueue
from conveyor.web import parse_tokens


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    env.update(extra)
    return env


def _serve(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "conveyor", "serve", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_refuses_a_public_address_without_tokens(tmp_path: Path) -> None:
    result = _serve("--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path}/q.db", env=_env())
    assert result.returncode == 1
    assert result.stderr.startswith("error: refusing to listen on 0.0.0.0 without tokens")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "q.db").exists()  # refused before opening anything


def test_bad_token_configuration_is_one_line_on_stderr(tmp_path: Path) -> None:
    result = _serve("--db", f"sqlite:///{tmp_path}/q.db", env=_env(CONVEYOR_TOKENS="admin:short"))
    assert result.returncode == 1
    assert "at least 8 characters" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_busy_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve("--port", str(port), "--db", f"sqlite:///{tmp_path}/q.db", env=_env())
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: cannot listen on 127.0.0.1:{port}: address already in use")
    assert not (tmp_path / "q.db").exists()  # refused before opening anything


@pytest.mark.slow
def test_serves_the_api_with_tokens_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    env = _env(CONVEYOR_TOKENS="admin:serve-admin-1,reader:serve-reader-1")
    command = [sys.executable, "-m", "conveyor", "serve", "--port", str(port),
               "--db", f"sqlite:///{tmp_path}/q.db", "--log-level", "warning"]  # fmt: skip
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None, "the server exited early"
            assert time.monotonic() < deadline, "the server did not answer in 30 s"
            time.sleep(0.1)
        assert httpx.get(f"{base}/api/stats").status_code == 401
        with RemoteQueue(base, "serve-admin-1") as admin:
            job = admin.enqueue("t", {"n": 1})
        with RemoteQueue(base, "serve-reader-1") as reader:
            assert reader.get(job.id) == job
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    # uvicorn shuts down gracefully, then may re-raise the signal it caught.
    assert server.returncode in (0, -signal.SIGTERM), stderr
    assert "Traceback" not in stderr
    assert f"on http://127.0.0.1:{port} (2 token(s))" in stderr


ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", ROOT / "docs" / "http.md", ROOT / "docs" / "deployment.md"]


def test_the_token_examples_of_the_docs_work() -> None:
    """Every literal CONVEYOR_TOKENS value the docs show is accepted as it is written."""
    examples = [
        value
        for doc in DOCS
        for value in re.findall(r'CONVEYOR_TOKENS(?:="|`\s*\(`")([^"]+)"', doc.read_text("utf-8"))
        if "$(" not in value and "…" not in value
    ]
    assert examples  # the README shows one
    for value in examples:
        assert parse_tokens(value), value
