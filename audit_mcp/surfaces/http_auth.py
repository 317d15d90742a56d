"""The bearer token in front of the streamable HTTP transport.

Every HTTP request must carry ``Authorization: Bearer <token>``; anything else gets 401 before it reaches the
MCP transport. The token is ``serve --http --token``, else ``AUDIT_MCP_TOKEN``, else the user's own token
file (``http-token`` in the state directory, readable by this user only, made on first use), so another
user of the machine cannot call the tools of a server on loopback. ``--no-token`` turns it off, on loopback
only. The transport's own Host/Origin protection still applies behind it.

A browser cannot send that header, so the audit page (``GET /``, read-only) also takes a *page key*: a value
derived from the token that opens the page and nothing else. ``serve`` prints the page's address with
``?key=<page key>``; the page route (after the Host/Origin check) answers it with a redirect to ``/`` that
sets the key as an HttpOnly, SameSite=Strict cookie, and the cookie then opens ``GET /`` alone. Neither the
key nor the cookie is accepted by ``/mcp``, and the token cannot be worked back from them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

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
PAGE_COOKIE = "audit_mcp_page"
PAGE_KEY_PARAM = "key"
PAGE_PATHS = ("/",)
# Where the page route finds, in the request's scope state, the cookie a valid ``?key=`` asks it to set.
SET_PAGE_COOKIE = "audit_mcp_set_page_cookie"


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


def page_key(token: str) -> str:
    """The key that opens the audit page (and nothing else) of a server with ``token``."""
    return hmac.new(token.encode(), b"audit-mcp page key v1", hashlib.sha256).hexdigest()


def _cookie(headers: dict[bytes, bytes], name: str) -> str:
    """The value of cookie ``name`` in the request's Cookie header, or ''."""
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value.strip()
    return ""


class BearerToken:
    """ASGI middleware: HTTP requests without the right bearer token are refused with 401, except a read of
    the audit page with its page key (``?key=`` or the cookie the page route sets from it)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()
        self._page_key = page_key(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        if scope.get("path") in PAGE_PATHS and scope.get("method") in ("GET", "HEAD"):
            if hmac.compare_digest(_cookie(headers, PAGE_COOKIE).encode(), self._page_key.encode()):
                await self.app(scope, receive, send)
                return
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if hmac.compare_digest((query.get(PAGE_KEY_PARAM) or [""])[0].encode(), self._page_key.encode()):
                scope.setdefault("state", {})[SET_PAGE_COOKIE] = self._page_key
                await self.app(scope, receive, send)
                return
        body = json.dumps(
            {
                "error": "unauthorized",
                "error_description": "send Authorization: Bearer <token>, the token the server was started with "
                f"(--token, {TOKEN_ENV}, or the {TOKEN_FILENAME} file in the user's audit-mcp state directory); "
                "in a browser, open the audit page's address that `audit-mcp serve --http` printed (it ends in "
                "?key=...)",
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
