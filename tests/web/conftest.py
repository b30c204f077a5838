"""Fixtures of the HTTP tests: an app with one token per role over a fresh database
(both backends), an in-process client, and a real uvicorn server on a free port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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
def live_server(app: FastAPI) -> Iterator[str]:
    """Run ``app`` under uvicorn on a free loopback port; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
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
    """Everything a bad request could have changed: counts and every job's fields."""
    return (q.stats(), [j.to_dict() for j in q.jobs(limit=10_000)])
