"""Fixtures of the console's tests: a real uvicorn server over a fresh database, and
pages in Debian's headless Chromium whose console is watched: a Content-Security-Policy
violation, an uncaught error, an unexpected console error or any alert/confirm/prompt
dialog fails the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

import conveyor
from conveyor.web import create_app
from tests.conftest import IN_CI, drop_schema, fresh_url
from tests.dashboard.browser import ARGS, CHROMIUM, live_server
from tests.web.conftest import TOKEN_OF, TOKENS

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# Long enough for a poll (every 2 s) on a busy 2-core machine.
WAIT_MS = 15_000


@dataclass
class Server:
    url: str
    queue: conveyor.Queue
    api: httpx.Client  # an admin's client of the HTTP API
    app: Any

    def page_url(self, path: str = "") -> str:
        return f"{self.url}/{path.lstrip('/')}"


@contextmanager
def serve(db_url: str, tokens: dict[str, str] | None = None, **app_args: Any) -> Iterator[Server]:
    queue = conveyor.connect(db_url)
    app = create_app(queue, tokens=tokens or {}, **app_args)
    headers = {"Authorization": f"Bearer {TOKEN_OF['admin']}"} if tokens else {}
    try:
        with live_server(app) as url, httpx.Client(base_url=url, headers=headers) as api:
            yield Server(url, queue, api, app)
    finally:
        queue.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'conveyor.db'}"


@pytest.fixture
def server(sqlite_url: str) -> Iterator[Server]:
    """SQLite, no tokens (every caller is an admin, as on loopback)."""
    with serve(sqlite_url) as running:
        yield running


@pytest.fixture
def token_server(sqlite_url: str) -> Iterator[Server]:
    """SQLite, with one token per role."""
    with serve(sqlite_url, TOKENS) as running:
        yield running


@pytest.fixture
def any_server(backend_name: str, tmp_path: Path) -> Iterator[Server]:
    """On SQLite and on PostgreSQL, no tokens."""
    url, schema = fresh_url(backend_name, tmp_path)
    try:
        with serve(url) as running:
            yield running
    finally:
        if schema:
            drop_schema(schema)


# -- the browser --------------------------------------------------------------------------


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        message = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@dataclass
class Watch:
    """What a page said on its console, and the dialogs it tried to open."""

    allow: tuple[str, ...] = ()
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("dialog", self._dialog)

    def _console(self, message: Any) -> None:
        text = message.text
        violation = "Content Security Policy" in text or "Refused to" in text
        if violation or (message.type == "error" and not any(a in text for a in self.allow)):
            self.errors.append(f"{message.type}: {text}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def check(self) -> None:
        assert not self.dialogs, f"the page opened dialogs: {self.dialogs}"
        assert not self.errors, f"the page's console reported: {self.errors}"


Opener = Callable[..., Any]


@pytest.fixture
def browse(browser: Any) -> Iterator[Opener]:
    """``browse(url, viewport=..., color_scheme=..., allow=(...))`` opens a page in a
    new browser context (its own session storage) and watches its console; every page
    is checked when the test ends. ``allow``: console error texts the test expects
    (such as the 401 a token server answers before sign-in); ``context``: open the page
    as another tab of that page's browser context; other keywords go to the context."""
    contexts: list[Any] = []
    watches: list[Watch] = []

    def open_page(
        url: str,
        *,
        viewport: dict[str, int] = DESKTOP,
        color_scheme: str = "light",
        allow: tuple[str, ...] = (),
        context: Any = None,
        **options: Any,
    ) -> Any:
        if context is None:
            context = browser.new_context(viewport=viewport, color_scheme=color_scheme, **options)
            context.set_default_timeout(WAIT_MS)
            contexts.append(context)
        page = context.new_page()
        watch = Watch(allow)
        watch.attach(page)
        watches.append(watch)
        page.watch = watch  # a test that expects a console error can look and clear it
        page.goto(url)
        return page

    yield open_page
    for context in contexts:
        context.close()
    for watch in watches:
        watch.check()


def sign_in(page: Any, role: str) -> None:
    page.locator("#token").fill(TOKEN_OF[role])
    page.get_by_role("button", name="Sign in").click()
    page.locator("header nav").wait_for(state="visible")


def expect_text(locator: Any, text: str) -> None:
    from playwright.sync_api import expect

    expect(locator).to_have_text(text, timeout=WAIT_MS)
