"""Fixtures of the HTTP tests: an app with one token per role over a fresh database
(both backends), an in-process client, a real uvicorn server on a free port, and a real
``conveyor serve`` process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from conveyor.client import RemoteQueue
from conveyor.web import create_app

TOKENS = {
    "admin-secret-0001": "admin",
    "worker-secret-0001": "worker",
    "reader-secret-0001": "reader",
}
TOKEN_OF = {role: token for token, role in TOKENS.items()}
ROLES = ("admin", "worker", "reader")
# A server without tokens answers only loopback Host names: its test clients use this.
LOCAL = "http://127.0.0.1"


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN_OF[role]}"}


@pytest.fixture
def app(db_url: str) -> FastAPI:
    return create_app(db_url, tokens=TOKENS)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    """An admin client; pass ``headers=bearer(role)`` to act as another role."""
    with TestClient(app, headers=bearer("admin")) as test_client:
        yield test_client


@pytest.fixture
def queue(app: FastAPI, client: TestClient) -> conveyor.Queue:
    """The server's own queue, to arrange state and check what the API did."""
    q: conveyor.Queue = app.state.conveyor.queue
    return q


@pytest.fixture
def remote(client: TestClient) -> RemoteQueue:
    """A RemoteQueue speaking to the app in process (admin token)."""
    return RemoteQueue(str(client.base_url), http=client)


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Run an ASGI ``app`` under uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture
def server_url(app: FastAPI) -> Iterator[str]:
    with live_server(app) as url:
        yield url


def snapshot(q: conveyor.Queue) -> tuple[Any, ...]:
    """Everything a bad request could have changed: counts, every job's fields, queue
    settings, registered workers and schedules."""
    return (
        q.stats(),
        [j.to_dict() for j in q.jobs(limit=10_000)],
        q.queue_settings(),
        q.workers(),
        q.schedules(),
    )


@dataclass
class Served:
    """A ``conveyor serve`` process: its base URL, and its log once it has stopped."""

    url: str
    process: subprocess.Popen[str]
    log: str = ""

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").split(":")
        return host, int(port)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    env.update(extra)
    return env


@contextmanager
def serving(db_url: str, *args: str, tokens: str | None = None) -> Iterator[Served]:
    """Run ``conveyor serve`` on a free port as a user would (``tokens``: the value of
    ``$CONVEYOR_TOKENS``); stop it with SIGTERM afterwards and keep its log (stdout and
    stderr, in a file: a pipe nobody reads would stall a server that logs a lot)."""
    port = free_port()
    env = serve_env(**({"CONVEYOR_TOKENS": tokens} if tokens else {}))
    command = [sys.executable, "-m", "conveyor", "serve", "--db", db_url, "--port", str(port),
               "--log-level", "info", *args]  # fmt: skip
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=log, text=True)
        served = Served(f"http://127.0.0.1:{port}", process)
        try:
            _wait_until_up(served)
            yield served
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            log.seek(0)
            served.log = log.read()


def _wait_until_up(served: Served) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{served.url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if served.process.poll() is not None:
            raise RuntimeError("conveyor serve exited before it answered")
        if time.monotonic() > deadline:
            raise RuntimeError("conveyor serve did not answer in 30 s")
        time.sleep(0.1)
