"""The MCP server over stdio, answering every line it cannot read instead of leaving its sender waiting.

The SDK's stdio transport turns a line that is not a JSON-RPC message (nesting past the JSON parser's limit,
a lone-surrogate escape, a number with thousands of digits, a well-formed object that is no request) into an
exception the server only logs: the client waits for an answer that never comes, until its own timeout.
Here such a line gets a JSON-RPC error at once: -32700 (parse error) or -32600 (invalid request), with the id
of the request when one can be read from the line's top level (a linear scan, no parser), else ``null``.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from pydantic import ValidationError

if TYPE_CHECKING:
    from mcp.server import MCPServer
    from mcp.shared._stream_protocols import ReadStream, WriteStream

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MAX_ID_CHARS = 200  # a longer id is no id a client sent on purpose: answered with null


def serve_stdio(server: MCPServer) -> None:
    """Run ``server`` over this process's stdin and stdout until stdin closes."""
    anyio.run(_serve, server)


async def _serve(server: MCPServer) -> None:
    lowlevel = server._lowlevel_server  # the SDK's own stdio runner, with the read side wrapped
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(Answering(read_stream, write_stream), write_stream, lowlevel.create_initialization_options())


class Answering:
    """A read stream that answers the lines it cannot deliver and passes everything else on."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], replies: WriteStream[SessionMessage]) -> None:
        self._inner = inner
        self._replies = replies

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            reply = refusal(item) if isinstance(item, Exception) else None
            if reply is None:
                return item
            await self._replies.send(SessionMessage(reply))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Answering:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Answering:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


def refusal(exc: Exception) -> JSONRPCError | None:
    """The error answering a line the transport could not read, or ``None`` when ``exc`` is no such line."""
    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    unreadable = any(e.get("type") == "json_invalid" for e in errors)
    raw = next((e.get("input") for e in errors if isinstance(e.get("input"), str)), None)
    parsed = next((e.get("input") for e in errors if isinstance(e.get("input"), dict)), None)
    if unreadable and isinstance(raw, str):
        found = request_id(raw)
    elif not unreadable and isinstance(parsed, dict):
        given = parsed.get("id")
        found = given if isinstance(given, str | int) and not isinstance(given, bool) else None
    else:
        return None
    if unreadable:
        what = str(errors[0].get("msg", "invalid JSON"))
        message = (
            f"{what}: the line is not JSON this server can read (at most 128 levels of nesting, numbers of at most "
            "4,300 digits, text that is valid UTF-8); nothing was done. Send each request as one line of such JSON."
        )
    else:
        message = (
            "the line is JSON but not a JSON-RPC 2.0 request, notification or response (each needs "
            '"jsonrpc": "2.0", and a request a "method" and an "id"); nothing was done.'
        )
    return JSONRPCError(
        jsonrpc="2.0",
        id=found,
        error=ErrorData(code=PARSE_ERROR if unreadable else INVALID_REQUEST, message=message),
    )


def request_id(raw: str) -> str | int | None:
    """The ``id`` member of the top-level object in ``raw``, read without parsing the rest (one pass, no
    recursion), or ``None`` when there is none or it is not a plain string or integer."""
    depth, i, n = 0, 0, len(raw)
    expect_key = False
    while i < n:
        char = raw[i]
        if char == '"':
            end = _string_end(raw, i)
            if end < 0:
                return None
            if depth == 1 and expect_key and raw[i + 1 : end] == "id":
                j = end + 1
                while j < n and raw[j] in " \t\r\n":
                    j += 1
                if j < n and raw[j] == ":":
                    return _value(raw, j + 1)
            expect_key = False
            i = end + 1
            continue
        if char in "{[":
            depth += 1
            expect_key = char == "{" and depth == 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 1:
            expect_key = True
        i += 1
    return None


def _string_end(raw: str, start: int) -> int:
    """The index of the quote closing the string opened at ``start``, or -1."""
    i = start + 1
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
            continue
        if raw[i] == '"':
            return i
        i += 1
    return -1


def _value(raw: str, at: int) -> str | int | None:
    """A JSON string or integer starting at ``at`` (after blanks), or ``None``."""
    while at < len(raw) and raw[at] in " \t\r\n":
        at += 1
    if at < len(raw) and raw[at] == '"':
        end = _string_end(raw, at)
        text = raw[at + 1 : end] if end > 0 else None
        if text is None or len(text) > MAX_ID_CHARS or "\\" in text:
            return None
        return text
    end = at + (1 if at < len(raw) and raw[at] == "-" else 0)
    while end < len(raw) and raw[end].isdigit():
        end += 1
    digits = raw[at:end]
    if not digits.lstrip("-") or len(digits) > 18 or (end < len(raw) and raw[end] in ".eE"):
        return None
    return int(digits)
