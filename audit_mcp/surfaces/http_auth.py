"""The bearer token in front of the streamable HTTP transport.

Every HTTP request must carry ``Authorization: Bearer <token>``; anything else gets 401 before it reaches the
MCP transport. The token is ``serve --http --token``, else ``AUDIT_MCP_TOKEN``, else the user's own token
file (``http-token`` in the state directory, readable by this user only, made on first use), so another
user of the machine cannot call the tools of a server on loopback. ``--no-token`` turns it off, on loopback
only. The transport's own Host/Origin protection still applies behind it.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.userstate import read_private, state_dir, write_private

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_ENV = "AUDIT_MCP_TOKEN"
MIN_TOKEN_CHARS = 16
TOKEN_FILENAME = "http-token"


def user_token() -> tuple[str, Path]:
    """The user's own bearer token and its file (made on first use, readable by this user only)."""
    path = state_dir() / TOKEN_FILENAME
    data = read_private(path, "the HTTP token file")
    if data is None:
        data = write_private(path, secrets.token_urlsafe(32).encode("ascii") + b"\n")
    token = data.decode("ascii", "replace").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the HTTP token file {path} holds a token of {len(token)} characters; remove the file")
    return token, path


class BearerToken:
    """ASGI middleware: HTTP requests without the right bearer token are refused with 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": "unauthorized",
                "error_description": "send Authorization: Bearer <token>, the token the server was started with "
                f"(--token, {TOKEN_ENV}, or the {TOKEN_FILENAME} file in the user's audit-mcp state directory)",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="audit-mcp"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
