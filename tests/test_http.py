"""`audit-mcp serve --http` binds loopback with Host/Origin protection on, and refuses to expose itself."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(repo: Path, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [exe, "serve", "--http", "--root", str(repo), "--port", str(port)], stdout=subprocess.DEVNULL, stderr=sink
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.anyio
async def test_the_http_server_answers_on_loopback(http_server: str) -> None:
    async with Client(http_server) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert "next_step" in tools


def test_a_foreign_host_header_is_rejected(http_server: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Host": "evil.example:80", "Accept": "application/json, text/event-stream"}
    response = httpx.post(http_server, json=body, headers=headers, timeout=5)
    assert response.status_code == 421


def test_binding_off_loopback_without_allowed_hosts_is_refused(repo: Path) -> None:
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    proc = subprocess.run(
        [exe, "serve", "--http", "--host", "0.0.0.0", "--root", str(repo)], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1
    assert "--allowed-host" in proc.stderr
