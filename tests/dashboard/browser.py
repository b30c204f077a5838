"""Headless Chromium for the console's tests and screenshots: Debian's ``chromium``
driven by Playwright (never a downloaded browser), and a real uvicorn server."""

from __future__ import annotations

import os
import shutil

from tests.web.conftest import live_server

__all__ = ["ARGS", "CHROMIUM", "live_server"]

CHROMIUM = (
    os.environ.get("CONVEYOR_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
