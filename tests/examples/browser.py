"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-
pipe``: JSON messages ending in NUL on file descriptors 3 and 4), to look at a page and
click on it as a person would, with nothing to install beyond Debian's ``chromium``."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, *, width: int = 1000, height: int = 900) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not installed (apt-get install chromium)")
        self._profile = tempfile.mkdtemp(prefix="chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser reads commands on fd 3 and writes answers on fd 4.
        self._proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
             f"--window-size={width},{height}", "about:blank"],
            close_fds=False,  # only inheritable descriptors pass: stdio, and 3 and 4 below
            preexec_fn=lambda: _as_3_and_4(to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.console: list[str] = []
        target = self._call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            self._call(domain, session=True)

    def _send(self, method: str, params: dict[str, Any], session: bool) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                raise RuntimeError("chromium exited")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def _call(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        wanted = self._send(method, params, session)
        while True:
            message = self._read(30)
            if message.get("method") in ("Runtime.consoleAPICalled", "Log.entryAdded"):
                self.console.append(json.dumps(message.get("params", {}))[:500])
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def open(self, url: str) -> None:
        self._call("Page.navigate", session=True, url=url)
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        answer = self._call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True,
            awaitPromise=True,
        )  # fmt: skip
        if "exceptionDetails" in answer:
            raise RuntimeError(f"{expression}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed: {expression}")
            time.sleep(0.05)

    def text(self, element_id: str) -> str:
        value = self.evaluate(
            f"(() => {{ const e = document.getElementById({json.dumps(element_id)});"
            " return e && !e.closest('[hidden]') ? e.textContent : null; })()"
        )
        return "" if value is None else str(value)

    def click(self, element_id: str) -> None:
        self.evaluate(f"document.getElementById({json.dumps(element_id)}).click()")

    def screenshot(self, path: Path) -> None:
        data = self._call("Page.captureScreenshot", session=True, format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self._call("Browser.close")
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)


def _as_3_and_4(reading: int, writing: int) -> None:
    """In the child: the pipe ends as descriptors 3 and 4 (copied high first, so neither
    overwrites the other)."""
    import fcntl

    high_r, high_w = (
        fcntl.fcntl(reading, fcntl.F_DUPFD, 10),
        fcntl.fcntl(writing, fcntl.F_DUPFD, 10),
    )
    os.dup2(high_r, 3)
    os.dup2(high_w, 4)
