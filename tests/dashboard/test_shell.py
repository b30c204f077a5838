"""The console's pages and files over HTTP: the shell under a strict CSP with no inline
code, the static files with their types, scripts that never parse markup, and paths
that follow a mount point."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import conveyor
from conveyor.web import create_app
from conveyor.web.console import CSP
from conveyor.web.console.pages import STATIC
from tests.dashboard.conftest import TOKENS


@pytest.fixture
def client(sqlite_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(sqlite_url, tokens=TOKENS)) as anonymous:
        yield anonymous


PAGES = ["/", "/jobs", "/jobs/42", "/workers", "/schedules"]


@pytest.mark.parametrize("path", PAGES)
def test_every_console_page_is_the_shell_under_a_strict_csp(client: TestClient, path: str) -> None:
    page = client.get(path)  # no token needed: there is no data in it
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.text
    assert re.findall(r"<script\b[^>]*>", html) == [
        '<script type="module" src="/console/app.js?v=' + conveyor.__version__ + '">'
    ]
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handlers
    assert "http://" not in html and "https://" not in html


def test_unknown_pages_and_files_are_404(client: TestClient) -> None:
    assert client.get("/jobs/not-a-number").status_code == 404
    assert client.get("/console/nothing.js").status_code == 404
    assert client.get("/console/../pyproject.toml").status_code == 404


@pytest.mark.parametrize(
    ("name", "media"), [("app.js", "javascript"), ("style.css", "text/css"), ("icon.svg", "svg")]
)
def test_static_files_are_served_with_their_type_and_the_csp(
    client: TestClient, name: str, media: str
) -> None:
    answer = client.get(f"/console/{name}")
    assert answer.status_code == 200
    assert media in answer.headers["content-type"]
    assert answer.headers["content-security-policy"] == CSP
    assert answer.headers["cache-control"] == "no-cache"


def test_the_scripts_never_parse_markup_or_evaluate_code() -> None:
    """Data reaches the page as text only: no HTML parsing sinks, no eval."""
    sinks = re.compile(
        r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
        r"setTimeout\(\s*['\"`]|createContextualFragment|DOMParser"
    )
    scripts = sorted(Path(STATIC).glob("*.js"))
    assert len(scripts) >= 8
    found = {p.name: sinks.findall(p.read_text()) for p in scripts}
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_the_console_works_under_a_mount_point(sqlite_url: str) -> None:
    outer = FastAPI()
    outer.mount("/queue", create_app(sqlite_url, tokens={}))
    with TestClient(outer, base_url="http://localhost") as mounted:
        page = mounted.get("/queue/jobs")
        assert page.status_code == 200
        assert 'src="/queue/console/app.js' in page.text
        assert 'href="/queue/jobs"' in page.text
        assert mounted.get("/queue/console/app.js").status_code == 200
        assert mounted.get("/queue/api/whoami").json()["role"] == "admin"


def test_the_openapi_document_leaves_the_pages_out(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "post" in paths["/api/jobs/bulk/retry"] and "post" in paths["/api/jobs/bulk/cancel"]
    assert "get" in paths["/api/whoami"]
    assert "/jobs" not in paths  # pages of the console, not API
