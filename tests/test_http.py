"""`audit-mcp serve --http` binds loopback with Host/Origin protection and a bearer token on, and refuses to
expose itself: the token is the user's own token file unless one is given, and off loopback one is required."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

ACCEPT = "application/json, text/event-stream"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
EXE = str(Path(sys.executable).with_name("audit-mcp"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(repo: Path, tmp_path: Path, *extra: str) -> Iterator[tuple[int, Path]]:
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [EXE, "serve", "--http", "--root", str(repo), "--port", str(port), *extra],
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    try:
        for _ in range(400):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.05)
        yield port, log
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def http_server(repo: Path, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A server started with no token option: it requires the user's own token."""
    yield from _serve(repo, tmp_path)


def _user_token() -> str:
    path = Path(os.environ["AUDIT_MCP_STATE_DIR"]) / "http-token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # readable by this user only
    return path.read_text().strip()


def _post(port: int, **headers: str) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{port}/mcp", json=PING, headers={"Accept": ACCEPT, **headers}, timeout=5)


def _passed(response: httpx.Response) -> bool:
    """The request reached the MCP transport (a ping outside a session gets its 400 there), past the token
    (401), Host (421) and Origin (403) checks."""
    return response.status_code not in (401, 403, 421)


@pytest.mark.anyio
async def test_the_http_server_answers_on_loopback_to_a_client_with_the_users_token(
    http_server: tuple[int, Path],
) -> None:
    port, log = http_server
    token = _user_token()
    assert "bearer token required: the token in" in log.read_text()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert "next_step" in tools


def test_without_the_token_another_local_process_gets_401(http_server: tuple[int, Path]) -> None:
    port, _ = http_server
    assert _post(port).status_code == 401
    assert _post(port, Authorization="Bearer not-the-token-0123456789").status_code == 401
    assert _passed(_post(port, Authorization=f"Bearer {_user_token()}"))


def test_a_foreign_host_header_is_rejected(http_server: tuple[int, Path]) -> None:
    port, _ = http_server
    assert _post(port, Host="evil.example:80", Authorization=f"Bearer {_user_token()}").status_code == 421


def test_the_servers_own_loopback_origins_are_accepted_and_others_refused(http_server: tuple[int, Path]) -> None:
    port, _ = http_server
    auth = f"Bearer {_user_token()}"
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"):
        assert _passed(_post(port, Origin=origin, Authorization=auth)), origin
    for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}", "null"):
        assert _post(port, Origin=origin, Authorization=auth).status_code == 403, origin


def test_no_token_serves_loopback_openly_when_asked(repo: Path, tmp_path: Path) -> None:
    for port, log in _serve(repo, tmp_path, "--no-token"):
        assert _passed(_post(port))
        assert "no bearer token" in log.read_text()


def test_binding_off_loopback_without_allowed_hosts_is_refused(repo: Path) -> None:
    proc = subprocess.run(
        [EXE, "serve", "--http", "--host", "0.0.0.0", "--root", str(repo)], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1
    assert "--allowed-host" in proc.stderr


def test_off_loopback_a_token_cannot_be_turned_off(repo: Path) -> None:
    proc = subprocess.run(
        [
            EXE,
            "serve",
            "--http",
            "--host",
            "0.0.0.0",
            "--allowed-host",
            "audit.internal",
            "--no-token",
            "--root",
            str(repo),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    assert "--no-token is refused on 0.0.0.0" in proc.stderr


def test_off_loopback_every_request_needs_the_token_even_with_an_allowed_host(repo: Path, tmp_path: Path) -> None:
    for port, _ in _serve(repo, tmp_path, "--host", "0.0.0.0", "--allowed-host", "audit.internal"):
        assert _post(port, Host="audit.internal").status_code == 401
        assert _passed(_post(port, Host="audit.internal", Authorization=f"Bearer {_user_token()}"))
