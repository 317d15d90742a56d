"""`serve --http` serves the audit page live at `/`: refused exactly as `/mcp` is (421 for a foreign Host, 403
for a foreign Origin, 401 without the bearer token), sent with its policy as a header, answered with 304 while
nothing changed, and in a real Chromium it redraws itself when a merge changes the audit."""

from __future__ import annotations

import os
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
