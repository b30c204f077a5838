"""The FastAPI recipe (examples/frameworks/fastapi_app): a lifespan-managed AsyncQueue,
a job enqueued in the request's own transaction, conveyor's API and dashboard under
/queue; on SQLite, PostgreSQL and MySQL (MariaDB)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient

from conveyor.errors import ConfigurationError
from conveyor.integrations.fastapi import Conveyor
from examples.frameworks.fastapi_app.app import app
from tests.frameworks.conftest import ROOT


@pytest.fixture
def client(app_db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("CONVEYOR_DATABASE_URL", app_db_url)
    monkeypatch.delenv("CONVEYOR_TOKENS", raising=False)
    with TestClient(
        app, base_url="http://localhost"
    ) as c:  # runs the lifespan: opens the queue and the tables
        yield c


def test_a_signup_and_its_welcome_job_commit_together(client: TestClient) -> None:
    created = client.post("/signups", json={"email": "ada@example.com"})
    assert created.status_code == 201
    job = client.get(f"/queue/api/jobs/{created.json()['welcome_job']}").json()
    assert (job["task"], job["payload"], job["status"]) == (
        "signups.welcome", {"email": "ada@example.com"}, "pending")  # fmt: skip
    shown = client.get(f"/signups/{created.json()['id']}").json()
    assert shown == {"id": created.json()["id"], "email": "ada@example.com", "welcome": "pending"}


def test_a_refused_signup_rolls_back_the_job_it_enqueued(client: TestClient) -> None:
    assert client.post("/signups", json={"email": "ada@example.com"}).status_code == 201
    # The second signup enqueues its job, then the insert is refused: both roll back.
    refused = client.post("/signups", json={"email": "ada@example.com"})
    assert refused.status_code == 409
    stats = client.get("/queue/api/stats").json()
    assert stats["total"] == 1
    jobs = client.get("/queue/api/jobs", params={"include": "payload,result"}).json()["jobs"]
    assert [j["payload"] for j in jobs] == [{"email": "ada@example.com"}]


def test_the_worker_sends_the_welcome(client: TestClient, app_db_url: str) -> None:
    created = client.post("/signups", json={"email": "ada@example.com"}).json()
    worker = subprocess.run(
        [sys.executable, "-m", "conveyor", "worker", "--burst",
         "--app", "examples.frameworks.fastapi_app.tasks:tasks", "--db", app_db_url],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert worker.returncode == 0, worker.stderr
    shown = client.get(f"/signups/{created['id']}").json()
    assert shown["welcome"] == "completed"
    job = client.get(f"/queue/api/jobs/{created['welcome_job']}").json()
    assert job["result"] == {"sent_to": "ada@example.com"}


def test_the_mounted_api_answers_503_until_the_lifespan_runs(tmp_path: Path) -> None:
    conveyor_ = Conveyor(f"sqlite:///{tmp_path / 'q.db'}")
    outer = FastAPI()  # no lifespan: nothing opens the queue
    outer.mount("/queue", conveyor_.api())

    @outer.get("/enqueue")
    async def enqueue(queue: object = Depends(conveyor_)) -> None: ...

    plain = TestClient(outer, base_url="http://localhost", raise_server_exceptions=False)
    answer = plain.get("/queue/api/stats")
    assert answer.status_code == 503 and answer.json()["error"]["code"] == "unavailable"
    with pytest.raises(ConfigurationError, match="lifespan"):
        _ = conveyor_.queue


def test_a_lifespan_of_your_own_can_enter_the_queue_s(tmp_path: Path) -> None:
    conveyor_ = Conveyor(f"sqlite:///{tmp_path / 'q.db'}")
    seen: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):  # type: ignore[no-untyped-def]
        async with conveyor_.lifespan(app):
            seen.append((await conveyor_.queue.enqueue("t")).status)
            yield

    with TestClient(FastAPI(lifespan=lifespan)):
        assert seen == ["pending"]
    with pytest.raises(ConfigurationError):  # closed with the app
        _ = conveyor_.queue


# -- in a browser, under a real server ----------------------------------------------
@contextlib.contextmanager
def _example_server(url: str) -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CONVEYOR_DATABASE_URL": url}
    env.pop("CONVEYOR_TOKENS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "examples.frameworks.fastapi_app", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/queue/healthz", timeout=1).status_code == 200:
                    break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.mark.parametrize("backend_name", ["sqlite"])
def test_the_dashboard_works_under_the_mount_path(app_db_url: str, tmp_path: Path) -> None:
    chromium = "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("headless Chromium (Debian package chromium) is not installed")
    with _example_server(app_db_url) as base:
        httpx.post(f"{base}/signups", json={"email": "ada@example.com"}).raise_for_status()
        # The console's job list under the mount path reaches the API below it.
        page = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=8000",
             "--dump-dom", f"{base}/queue/jobs"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert page.returncode == 0, page.stderr[-2000:]
    dom = page.stdout
    assert "signups.welcome" in dom  # the jobs table, filled from the API
    assert "Not Found" not in dom and "not_found" not in dom


# -- conveyor's own URL options ------------------------------------------------------
@pytest.mark.parametrize("backend_name", ["postgresql"])
def test_a_schema_url_puts_the_application_tables_beside_the_queue(
    app_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setenv("CONVEYOR_DATABASE_URL", f"{app_db_url}?schema=shop")
    monkeypatch.delenv("CONVEYOR_TOKENS", raising=False)
    with TestClient(app, base_url="http://localhost") as c:
        created = c.post("/signups", json={"email": "ada@example.com"})
        assert created.status_code == 201, created.text
        job = c.get(f"/queue/api/jobs/{created.json()['welcome_job']}").json()
        assert job["status"] == "pending"
    with psycopg.connect(app_db_url) as conn:
        found = conn.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'signups'"
        ).fetchall()
    assert found == [("shop",)]


@pytest.mark.parametrize("backend_name", ["postgresql"])
def test_an_unusable_database_is_one_line_and_an_exit(app_db_url: str) -> None:
    env = {**os.environ, "CONVEYOR_DATABASE_URL": f"{app_db_url}?schema=shop&sslmode=bogus"}
    done = subprocess.run(
        [sys.executable, "-m", "examples.frameworks.fastapi_app", "--port", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "sslmode" in lines[0]


@pytest.mark.parametrize("backend_name", ["mysql"])
def test_an_unusable_mysql_database_is_one_line_and_an_exit(app_db_url: str) -> None:
    missing = app_db_url.rsplit("/", 1)[0] + "/conveyor_no_such_database"
    done = subprocess.run(
        [sys.executable, "-m", "examples.frameworks.fastapi_app", "--port", "1"],
        cwd=ROOT, env={**os.environ, "CONVEYOR_DATABASE_URL": missing},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "conveyor_no_such_database" in lines[0]
