"""What an MCP session hears besides replies: log messages at the level it chose, and resources that changed.

On the handshake protocols (2025-11-25 and before) the server declares ``logging`` and answers
``logging/setLevel``; a session gets the log messages at or above the level it set (``info`` until it sets
one). It may ``resources/subscribe`` to a resource and then gets ``notifications/resources/updated`` each
time that resource changes. On 2026-07-28 a client listens with ``subscriptions/listen``: changes are
published on the SDK's subscription bus (``Context.notify_resource_updated``), and log messages reach only
the requests that opted in through ``_meta`` (the SDK's session enforces that).

``MCPServer`` has no public hook for ``logging/setLevel`` nor for the handshake-era subscribe requests, so
they are registered on its low-level server; and the SDK gives each request its own ``ServerSession`` proxy,
so a client's level and subscriptions are kept by its connection. Both private reaches are here only.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LOG_LEVEL = "info"

STEP_URIS = ("audit://step/current", "audit://step/current/prompt")
# What any change to the audit's state can change: the status view, coverage and the (provisional) reports.
STATE_URIS = ("audit://status", "audit://coverage", "audit://report", "audit://report/json", "audit://report/sarif")


def digest(paths: Iterable[Path]) -> str:
    """A digest of some files' bytes (a missing file counts as empty), to tell whether a call changed them."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes() if path.is_file() else b"")
        h.update(b"\0")
    return h.hexdigest()


def _connection(session: Any) -> Any:
    """The connection behind a per-request session proxy: what stays the same across a client's requests."""
    return session._connection


class SessionChannels:
    """Each connection's log level and resource subscriptions, and the sending of updates to them."""

    def __init__(self) -> None:
        self._levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        # connection -> {uri: a session proxy of that connection, to send through}; dropped when sending fails
        self._subscribed: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def install(self, server: MCPServer) -> None:
        low = server._lowlevel_server  # no public hook for these handshake-era requests (see the module docstring)
        low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._set_level)
        low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, self._subscribe)
        low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe)

    async def _set_level(self, ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        with self._lock:
            self._levels[_connection(ctx.session)] = params.level
        return types.EmptyResult()

    async def _subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        with self._lock:
            self._subscribed.setdefault(_connection(ctx.session), {})[str(params.uri)] = ctx.session
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        with self._lock:
            self._subscribed.get(_connection(ctx.session), {}).pop(str(params.uri), None)
        return types.EmptyResult()

    def wants_log(self, session: Any, level: str) -> bool:
        """Whether the client behind ``session`` asked for messages of ``level`` (at or above the level it set)."""
        with self._lock:
            chosen = self._levels.get(_connection(session), DEFAULT_LOG_LEVEL)
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(chosen)

    async def changed(self, ctx: Context, uris: Iterable[str]) -> None:
        """Tell every subscriber of each of ``uris`` that it changed, on whichever protocol it speaks."""
        for uri in dict.fromkeys(uris):
            with self._lock:
                targets = [(conn, subs[uri]) for conn, subs in self._subscribed.items() if uri in subs]
            for conn, session in targets:
                try:
                    await session.send_resource_updated(uri)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    with self._lock:
                        self._subscribed.pop(conn, None)  # the client has gone
            await ctx.notify_resource_updated(uri)
