"""An optional bearer token in front of the streamable HTTP transport.

With a token set (``serve --http --token`` or ``AUDIT_MCP_TOKEN``), every HTTP request must carry
``Authorization: Bearer <token>``; anything else gets 401 before it reaches the MCP transport. The
transport's own Host/Origin protection still applies behind it.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_ENV = "AUDIT_MCP_TOKEN"
MIN_TOKEN_CHARS = 16


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
                "error_description": "send Authorization: Bearer <token>, "
                f"the token the server was started with (--token or {TOKEN_ENV})",
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
