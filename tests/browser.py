"""A real headless Chromium for the page's tests (and its benchmark), driven through ChromeDriver over HTTP.

Debian's ``chromium`` and ``chromium-driver`` packages; ChromeDriver's W3C endpoints with httpx (already a
dependency), so no other Python package: navigation, scripts, real clicks, the browser's console log and
its DevTools network events (``goog:loggingPrefs`` performance log), and DevTools commands through
ChromeDriver's ``goog/cdp/execute`` for full-page screenshots. Chromium runs with the flags this machine's
closed network needs (no background networking, a fresh profile).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REQUIRE_ENV = "AUDIT_MCP_REQUIRE_CHROMIUM"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference


def binaries() -> tuple[str, str] | None:
    """Chromium's executable (the binary itself, not Debian's wrapper script, when it is there) and
    ChromeDriver's, or None when either is missing."""
    driver = shutil.which("chromedriver")
    wrapper = shutil.which("chromium")
    real = "/usr/lib/chromium/chromium"
    browser = real if Path(real).is_file() else wrapper
    return (browser, driver) if browser and driver else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Browser:
    """One ChromeDriver session: a headless Chromium window."""

    def __init__(self, http: httpx.Client, session: str) -> None:
        self.http = http
        self.base = f"/session/{session}"

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        response = self.http.request(method, self.base + path, json=body, timeout=timeout)
        value = response.json().get("value")
        if response.status_code != 200:
            raise RuntimeError(f"ChromeDriver {method} {path}: {response.status_code} {value}")
        return value

    def logs(self, kind: str) -> list[dict[str, Any]]:
        """The entries of a log (``browser``: the console; ``performance``: DevTools events) since the last read."""
        entries: list[dict[str, Any]] = self._call("POST", "/se/log", {"type": kind})
        return entries

    def console(self) -> list[dict[str, Any]]:
        return self.logs("browser")

    def requests(self) -> list[str]:
        """The URL of every request the page made since the last read (each DevTools requestWillBeSent)."""
        urls = []
        for entry in self.logs("performance"):
            message = json.loads(entry["message"])["message"]
            if message["method"] == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return urls

    def open(self, url: str, *, renders: int = 1, timeout: float = 30) -> float:
        """Navigate to ``url`` and wait until the page has drawn itself ``renders`` times; the seconds it took."""
        self._call("POST", "/url", {"url": "about:blank"})
        self.console(), self.requests()  # what came before this page is not this page's
        start = time.perf_counter()
        self._call("POST", "/url", {"url": url}, timeout=timeout)
        try:
            self.wait(f"return Number(document.documentElement.dataset.ready || 0) >= {renders}", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{url} did not draw itself; its console: {self.console()}") from exc
        return time.perf_counter() - start

    def run(self, script: str, *args: Any) -> Any:
        return self._call("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait(self, script: str, timeout: float = 10) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.run(script)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for: {script}")
            time.sleep(0.05)

    def find(self, css: str) -> str:
        found = self._call("POST", "/element", {"using": "css selector", "value": css})
        if not isinstance(found, dict) or ELEMENT not in found:
            raise AssertionError(f"no element matches {css!r}: {found}")
        return str(found[ELEMENT])

    def click(self, css: str) -> None:
        """A real click (a trusted event, as a person's) on the first element ``css`` selects."""
        self._call("POST", f"/element/{self.find(css)}/click", {})

    def type(self, css: str, text: str) -> None:
        self._call("POST", f"/element/{self.find(css)}/value", {"text": text})

    def cdp(self, command: str, **params: Any) -> Any:
        return self._call("POST", "/goog/cdp/execute", {"cmd": command, "params": params})

    def screenshot(self, path: Path) -> Path:
        """The whole page (beyond the window) as a PNG at ``path``."""
        shot = self.cdp("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@contextmanager
def chromium(profile: Path) -> Iterator[Browser]:
    """A headless Chromium under ChromeDriver, its profile in ``profile`` (a fresh folder)."""
    found = binaries()
    if found is None:
        raise FileNotFoundError("chromium or chromedriver is not installed (apt-get install chromium chromium-driver)")
    browser, driver = found
    port = _free_port()
    log = profile.parent / f"{profile.name}-chromedriver.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen([driver, f"--port={port}"], stdout=sink, stderr=subprocess.STDOUT)
    try:
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        deadline = time.monotonic() + 20
        while True:
            try:
                if http.get("/status").json()["value"]["ready"]:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromedriver did not start: {log.read_text(errors='replace')}")
            time.sleep(0.05)
        options = {"binary": browser, "args": [*CHROMIUM_FLAGS, f"--user-data-dir={profile}"]}
        capabilities = {
            "browserName": "chrome",
            "goog:chromeOptions": options,
            "goog:loggingPrefs": {"browser": "ALL", "performance": "ALL"},
        }
        created = http.post("/session", json={"capabilities": {"alwaysMatch": capabilities}}).json()["value"]
        if "sessionId" not in created:
            raise RuntimeError(f"chromedriver could not start chromium: {created}")
        session = Browser(http, created["sessionId"])
        try:
            yield session
        finally:
            http.delete(session.base)
            http.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def required() -> bool:
    """Whether a missing browser fails the tests (CI sets it) instead of skipping them."""
    return bool(os.environ.get(REQUIRE_ENV))
