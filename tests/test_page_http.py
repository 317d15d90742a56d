"""`serve --http` serves the audit page live at `/`: refused exactly as `/mcp` is (421 for a foreign Host, 403
for a foreign Origin, 401 without the bearer token), sent with its policy as a header, answered with 304 while
nothing changed, and in a real Chromium it redraws itself when a merge changes the audit."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from audit_mcp.usecases.service import AuditService
from tests.browser import Browser
from tests.page_audit import CAPS, answer_run, hostile_repo, hostile_reviewer

TOKEN = "page-token-for-tests-0123456789"


@contextmanager
def serving(repo: Path, log: Path, token: str | None = None) -> Iterator[str]:
    """``audit-mcp serve --http`` on a free loopback port (with ``token``, or with ``--no-token``); its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if k != "AUDIT_MCP_TOKEN"}
    if token:
        env["AUDIT_MCP_TOKEN"] = token
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [exe, "serve", "--http", "--root", str(repo), "--port", str(port), *([] if token else ["--no-token"])],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def started(tmp_path: Path) -> tuple[AuditService, object]:
    """An audit of the hostile fixture with its first run dispatched and not yet answered."""
    service = AuditService(hostile_repo(tmp_path))
    return service, service.next_step(CAPS)


def _answer(method: str, url: str, headers: dict[str, str]) -> tuple[int, str, str | None]:
    response = httpx.request(method, url, headers=headers, timeout=10)
    return response.status_code, response.text, response.headers.get("www-authenticate")


REFUSALS = [
    pytest.param({"Host": "evil.example:80"}, 421, id="foreign-host"),
    pytest.param({"Origin": "http://evil.example"}, 403, id="foreign-origin"),
    pytest.param({"Host": "attacker.test", "Origin": "http://attacker.test"}, 421, id="rebinding"),
]


@pytest.mark.parametrize(("headers", "status"), REFUSALS)
def test_the_page_is_refused_as_mcp_is(
    started: tuple[AuditService, object], tmp_path: Path, headers: dict[str, str], status: int
) -> None:
    service, _ = started
    with serving(service.root, tmp_path / "server.log") as base:
        json = {"Content-Type": "application/json"}  # a POST without it is refused first, by both, with 400
        for method, extra in (("GET", {}), ("POST", json), ("DELETE", {}), ("POST", {})):
            page = _answer(method, base + "/", {**headers, **extra})
            mcp = _answer(method, base + "/mcp", {**headers, **extra, "Accept": "text/event-stream"})
            assert page == mcp and page[0] == (status if extra or method != "POST" else 400), method
        assert _answer("GET", base + "/", {})[0] == 200
        assert _answer("POST", base + "/", json)[0] == 405


def test_without_the_bearer_token_the_page_is_refused_as_mcp_is(
    started: tuple[AuditService, object], tmp_path: Path
) -> None:
    service, _ = started
    with serving(service.root, tmp_path / "server.log", TOKEN) as base:
        for given in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": TOKEN}):
            page = _answer("GET", base + "/", given)
            mcp = _answer("GET", base + "/mcp", {**given, "Accept": "text/event-stream"})
            assert page == mcp and page[0] == 401 and (page[2] or "").startswith("Bearer")
        right = {"Authorization": f"Bearer {TOKEN}"}
        foreign = {**right, "Host": "evil.example:80"}
        assert _answer("GET", base + "/", foreign) == _answer("GET", base + "/mcp", foreign) and (
            _answer("GET", base + "/", foreign)[0] == 421
        )
        assert _answer("GET", base + "/", right)[0] == 200


def _printed_page_url(log: Path) -> str:
    line = next(line for line in log.read_text().splitlines() if "the audit page at" in line)
    return re.search(r"the audit page at (\S+)", line).group(1)  # type: ignore[union-attr]


def test_a_browser_opens_the_page_with_the_key_serve_printed_and_the_key_opens_nothing_else(
    started: tuple[AuditService, object], tmp_path: Path
) -> None:
    service, _ = started
    log = tmp_path / "server.log"
    with serving(service.root, log, TOKEN) as base:
        printed = _printed_page_url(log)
        assert printed.startswith(base + "/?key=") and TOKEN not in log.read_text()
        key = printed.split("?key=", 1)[1]
        opened = httpx.get(printed, timeout=30)  # no redirects followed: the key becomes a cookie, then "/"
        assert opened.status_code == 303 and opened.headers["location"] == "/"
        cookie = opened.headers["set-cookie"]
        assert cookie.startswith(f"audit_mcp_page={key};")
        assert {"httponly", "samesite=strict", "path=/"} <= {part.strip().lower() for part in cookie.split(";")}
        with httpx.Client(base_url=base, timeout=30) as browser_like:
            assert browser_like.get("/", params={"key": key}, follow_redirects=True).status_code == 200
            assert browser_like.get("/").status_code == 200  # the cookie alone opens the page
            assert browser_like.head("/").status_code == 200
            # ... and nothing else: not the tools, not a write to the page's address.
            assert browser_like.get("/mcp", headers={"Accept": "text/event-stream"}).status_code == 401
            assert browser_like.post("/mcp", json={}, headers={"Accept": "text/event-stream"}).status_code == 401
            assert browser_like.post("/", json={}).status_code == 401
        for given in (f"Bearer {key}", f"Bearer {printed}"):
            assert _answer("GET", base + "/mcp", {"Authorization": given, "Accept": "text/event-stream"})[0] == 401
        assert _answer("GET", base + "/mcp?key=" + key, {"Accept": "text/event-stream"})[0] == 401
        wrong = {"Cookie": "audit_mcp_page=" + key[:-1] + ("0" if key[-1] != "0" else "1")}
        assert _answer("GET", base + "/", wrong)[0] == 401
        assert _answer("GET", base + "/?key=" + key[::-1], {})[0] == 401
        # The Host and Origin checks run before the key turns into a cookie.
        assert httpx.get(printed, headers={"Host": "evil.example:80"}, timeout=30).status_code == 421
        refused = httpx.get(printed, headers={"Origin": "http://evil.example"}, timeout=30)
        assert refused.status_code == 403 and "set-cookie" not in refused.headers


def test_a_browser_given_the_printed_address_reads_the_live_page_and_its_refreshes(
    browser: Browser, started: tuple[AuditService, object], tmp_path: Path
) -> None:
    service, step = started
    log = tmp_path / "server.log"
    with serving(service.root, log, TOKEN) as base:
        browser.open(_printed_page_url(log))
        assert browser.run("return location.href") == base + "/"  # the key left the address bar
        answer_run(service, hostile_reviewer(), step)
        browser.wait("return Number(document.documentElement.dataset.ready) >= 2", timeout=30)
        assert browser.run("return document.cookie") == ""  # HttpOnly: the page's script cannot read it
        assert [e["message"] for e in browser.console()] == []


def test_the_live_page_carries_its_policy_and_answers_304_until_the_audit_changes(
    started: tuple[AuditService, object], tmp_path: Path
) -> None:
    service, step = started
    with serving(service.root, tmp_path / "server.log") as base:
        first = httpx.get(base + "/", timeout=30)
        assert first.status_code == 200 and first.headers["content-type"].startswith("text/html")
        policy = first.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "connect-src 'self'" in policy
        assert "frame-ancestors 'none'" in policy and first.headers["x-content-type-options"] == "nosniff"
        assert 'data-live="1"' in first.text and "connect-src &#x27;" not in first.text
        etag = first.headers["etag"]
        assert httpx.get(base + "/", headers={"If-None-Match": etag}, timeout=30).status_code == 304
        answer_run(service, hostile_reviewer(), step)
        after = httpx.get(base + "/", headers={"If-None-Match": etag}, timeout=30)
        assert after.status_code == 200 and after.headers["etag"] != etag


def test_before_any_audit_the_page_says_how_to_start_one(repo: Path, tmp_path: Path) -> None:
    with serving(repo, tmp_path / "server.log") as base:
        response = httpx.get(base + "/", timeout=30)
    assert response.status_code == 404 and "next_step" in response.text
    assert not (repo / ".audit-mcp").exists()  # looking created nothing


def test_the_live_page_redraws_itself_after_a_merge(
    browser: Browser, started: tuple[AuditService, object], tmp_path: Path
) -> None:
    service, step = started
    with serving(service.root, tmp_path / "server.log") as base:
        url = base + "/"
        browser.open(url)
        before = browser.run("return document.querySelectorAll('#map-grid .cell[data-state=\"reviewed\"]').length")
        assert before == 0
        assert browser.run("return document.getElementById('completeness').textContent") == "unknown"
        answer_run(service, hostile_reviewer(), step)  # the first run (the threat model's) merged
        step = service.next_step()
        answer_run(service, hostile_reviewer(), step)  # and the review run: most cells reviewed
        browser.wait("return Number(document.documentElement.dataset.ready) >= 2", timeout=30)
        after = browser.run("return document.querySelectorAll('#map-grid .cell[data-state=\"reviewed\"]').length")
        assert after > 50
        assert browser.run("return document.getElementById('refresh').textContent").startswith("updated")
        assert [e["message"] for e in browser.console()] == []
        requested = browser.requests()
        assert requested and set(requested) == {url}  # the page, then its refreshes: nothing else
