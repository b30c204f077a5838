"""The pages in a real browser (headless Chromium), under the server's content security
policy: the dashboard shows the jobs, and /docs renders the API from the package's own
files with every other host unreachable. A policy violation would appear on the
browser's console, which is read here."""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from conveyor.web import create_app
from tests.conftest import IN_CI
from tests.web.conftest import live_server

pytestmark = pytest.mark.slow


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if IN_CI:
            pytest.fail("headless Chromium is needed for the browser tests (Debian: chromium)")
        pytest.skip("no chromium on this machine")
    return found


def _render(url: str, tmp_path: Path, *, offline: bool = False) -> tuple[str, str]:
    """The page's DOM once its scripts ran, and the browser's console log."""
    command = [
        _chromium(), "--headless", "--no-sandbox", "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=8000",
        "--enable-logging=stderr", "--v=0", "--dump-dom", url,
    ]  # fmt: skip
    if offline:  # every name but the server's own fails to resolve
        command.insert(1, "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def test_the_dashboard_shows_the_jobs_under_the_policy(db_url: str, tmp_path: Path) -> None:
    app = create_app(db_url, tokens={})
    app.state.conveyor.queue.enqueue("books.sync-dashboard-check", queue="sync")
    with live_server(app) as url:
        dom, console = _render(f"{url}/jobs", tmp_path)
    assert "books.sync-dashboard-check" in dom  # the job list, filled from the API
    assert "Content Security Policy" not in console


def test_the_docs_render_offline_under_the_policy(db_url: str, tmp_path: Path) -> None:
    app = create_app(db_url, tokens={})
    with live_server(app) as url:
        dom, console = _render(f"{url}/docs", tmp_path, offline=True)
    assert 'data-path="/api/queues/{queue}/claim"' in dom  # the operations are listed
    assert "Content Security Policy" not in console


EVIL_PAGE = """<!doctype html>
<html><body>
<form id="form" method="POST" action="{target}/api/jobs/{job}/cancel"></form>
<script>
fetch("{target}/api/recover", {{method: "POST", mode: "no-cors"}});
fetch("{target}/api/queues/default/pause",
      {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body: "{{}}"}});
document.getElementById("form").submit();
</script>
</body></html>
"""


class _Recorder:
    """An ASGI wrapper that notes every request reaching the app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append((scope["method"], scope["path"]))
        await self.app(scope, receive, send)


def test_a_page_of_another_site_cannot_act_on_a_server_without_tokens(
    db_url: str, tmp_path: Path
) -> None:
    """The attack as a browser makes it: a page served from another origin posts a form
    to cancel a job and fires no-cors fetches at the queue, which has no tokens. The
    requests arrive (the browser sends them) and change nothing."""
    app = create_app(db_url, tokens={})
    q = app.state.conveyor.queue
    job = q.enqueue("t")
    recorder = _Recorder(app)
    with live_server(recorder) as target:  # type: ignore[arg-type]
        (tmp_path / "evil.html").write_text(EVIL_PAGE.format(target=target, job=job.id))
        with _static_site(tmp_path) as evil:
            _render(f"{evil}/evil.html", tmp_path)
        assert ("POST", f"/api/jobs/{job.id}/cancel") in recorder.seen
        assert ("POST", "/api/recover") in recorder.seen
        assert q.get(job.id).status == "pending"
        assert q.queue_settings() == {}


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _static_site(directory: Path) -> Iterator[str]:
    """Another origin: a plain file server on another port of the same host."""
    handler = functools.partial(_QuietFiles, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
