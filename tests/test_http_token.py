"""`audit-mcp serve --http` with a bearer token: 401 without it, the MCP protocol with it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

TOKEN = "s3cret-token-for-tests-0123456789"
ACCEPT = "application/json, text/event-stream"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def token_server(repo: Path, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    log = tmp_path / "server.log"
    env = {**os.environ, "AUDIT_MCP_TOKEN": TOKEN}
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [exe, "serve", "--http", "--root", str(repo), "--port", str(port)],
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
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_requests_without_the_right_token_get_401(token_server: str) -> None:
    missing = httpx.post(token_server, json=PING, headers={"Accept": ACCEPT}, timeout=5)
    wrong = httpx.post(token_server, json=PING, headers={"Accept": ACCEPT, "Authorization": "Bearer nope"}, timeout=5)
    for response in (missing, wrong):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "AUDIT_MCP_TOKEN" in response.json()["error_description"]


def test_the_host_protection_still_applies_behind_the_token(token_server: str) -> None:
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example:80"}
    assert httpx.post(token_server, json=PING, headers=headers, timeout=5).status_code == 421


@pytest.mark.anyio
async def test_a_client_with_the_token_speaks_mcp(token_server: str) -> None:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with http, Client(streamable_http_client(token_server, http_client=http)) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert {"next_step", "submit_packet", "merge_and_ingest"} <= tools


def test_a_short_token_is_refused(repo: Path) -> None:
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    proc = subprocess.run(
        [exe, "serve", "--http", "--root", str(repo), "--token", "short"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1 and "at least 16" in proc.stderr
