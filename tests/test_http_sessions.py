"""HTTP sessions: an idle one is closed after the documented timeout, and however many clients open one and
walk away, the server's session table stays bounded (past the cap a new session is refused, not kept)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.server.transport_security import TransportSecuritySettings

from audit_mcp.surfaces.cli import build_parser
from audit_mcp.surfaces.cli.serving import MAX_SESSIONS, SESSION_IDLE_SECONDS
from audit_mcp.surfaces.server import build_server

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "walks-away", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@asynccontextmanager
async def _serving(repo: Path, idle: float, cap: int) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    server = build_server(repo)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=["127.0.0.1:8765"])
    app = server.streamable_http_app(transport_security=security, session_idle_timeout=idle, max_sessions=cap)
    manager = server.session_manager
    async with manager.run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
            yield client, manager


async def _open(client: httpx.AsyncClient) -> int:
    """One client that initializes a session and never comes back (no DELETE)."""
    response = await client.post("/mcp", content=json.dumps(INITIALIZE), headers=HEADERS)
    return response.status_code


@pytest.mark.anyio
async def test_thousands_of_abandoned_sessions_keep_the_session_table_bounded(repo: Path) -> None:
    cap = 100
    async with _serving(repo, idle=3600, cap=cap) as (client, manager):
        statuses = [await _open(client) for _ in range(1_000)]
        table = manager._server_instances  # the server's own record of open sessions
        assert len(table) == cap
        assert statuses.count(200) == cap and statuses.count(503) == 1_000 - cap


@pytest.mark.anyio
async def test_an_idle_session_is_closed_after_the_timeout_and_its_slot_is_free_again(repo: Path) -> None:
    async with _serving(repo, idle=0.2, cap=50) as (client, manager):
        table = manager._server_instances
        assert [await _open(client) for _ in range(50)] == [200] * 50
        assert 0 < len(table) <= 50
        emptied = anyio.Event()
        discard = manager._discard_session

        async def discarded(session_id: str, transport: Any) -> None:
            await discard(session_id, transport)
            if not table:
                emptied.set()

        manager._discard_session = discarded
        with anyio.fail_after(30):
            await emptied.wait()  # every abandoned session closed itself once idle
        assert await _open(client) == 200 and len(table) == 1


def test_serve_documents_its_idle_timeout_and_session_cap() -> None:
    args = build_parser().parse_args(["serve", "--http"])
    assert args.session_idle_timeout == SESSION_IDLE_SECONDS == 600 and args.max_sessions == MAX_SESSIONS
    hosts = (Path(__file__).resolve().parent.parent / "docs" / "hosts.md").read_text()
    assert "--session-idle-timeout" in hosts and "--max-sessions" in hosts
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--session-idle-timeout", "0"])
