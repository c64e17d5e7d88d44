"""A headless Chromium driven over the DevTools protocol on a pipe, with the standard library.

Why not Playwright: its pip package wants its own browser download (closed here) and a
Node driver; Chromium speaks the same protocol on file descriptors 3 (commands in) and 4
(replies out) with ``--remote-debugging-pipe``, each message JSON ended by a NUL byte. One
browser per test session, one page per :meth:`Chromium.open`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-pipe",
)


def find() -> str | None:
    """The Chromium to use, or ``None`` when none is installed."""
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


class BrowserError(Exception):
    """The browser did not start, answer, or do what it was asked in time."""


class Chromium:
    """One running headless Chromium; ``session`` is the page it has open."""

    def __init__(
        self, binary: str, profile_dir: Path, width: int = 1280, height: int = 900
    ) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        null = os.open(os.devnull, os.O_RDWR)
        actions = [
            (os.POSIX_SPAWN_DUP2, null, 0),
            (os.POSIX_SPAWN_DUP2, null, 1),
            (os.POSIX_SPAWN_DUP2, null, 2),
            (os.POSIX_SPAWN_DUP2, to_browser_r, 3),
            (os.POSIX_SPAWN_DUP2, from_browser_w, 4),
        ]
        argv = [binary, *FLAGS, f"--user-data-dir={profile_dir}", f"--window-size={width},{height}"]
        self.pid = os.posix_spawn(binary, argv, os.environ, file_actions=actions, setsid=True)
        for fd in (to_browser_r, from_browser_w, null):
            os.close(fd)
        self.width, self.height = width, height
        self._next = 0
        self._buffer = b""
        self.session = ""

    def call(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one command (to the open page unless it is a ``Target.`` one) and wait
        for its reply, skipping events."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its pipe (did it start?)")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(raw))

    def open(self, url: str) -> None:
        """Open ``url`` in a new page at the window's size and wait until it has loaded."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able)."""
        done = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in done:
            raise BrowserError(f"{expression!r} threw: {done['exceptionDetails']}")
        return done.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> None:
        """Poll until ``expression`` is true in the page."""
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"!!({expression})"):
            if time.monotonic() > deadline:
                raise BrowserError(f"{expression!r} never became true")
            time.sleep(0.05)

    def click(self, x: float, y: float) -> None:
        """A real left click at viewport coordinates (through the browser's input path)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path) -> None:
        """The viewport as a PNG file."""
        path.write_bytes(
            base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        )

    def close(self) -> None:
        """Stop the browser (its whole process group: it was started in its own session)."""
        with contextlib.suppress(BrowserError, OSError):
            self.call("Browser.close", timeout=5)
        for fd in (self._to_browser, self._from_browser):
            os.close(fd)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                return
            time.sleep(0.05)
        os.killpg(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
