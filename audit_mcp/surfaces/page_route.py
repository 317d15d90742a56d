"""The live audit page at ``/`` of ``serve --http``, behind the guards ``/mcp`` has.

The same Host/Origin check as the MCP transport (the SDK's own, with the same settings: a foreign Host is
421, a foreign Origin 403) runs first, and the bearer token, when the server has one, wraps the whole
application, so ``/`` answers 401 as ``/mcp`` does, unless the request carries the page key
(``http_auth``): a ``?key=`` that passed is answered, once the Host/Origin check has passed too, with a
redirect to ``/`` that sets the key as the page's cookie (HttpOnly, SameSite=Strict), so the key leaves the
address bar. The page is drawn from the store on request, kept while
the store has not changed (its tag is the page's ETag, so a browser's refresh costs a 304), and sent with
its Content-Security-Policy as a header too (the header adds what a ``<meta>`` policy cannot: no framing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from audit_mcp.core.errors import AuditError, NotFoundError
from audit_mcp.findings.page import content_security_policy
from audit_mcp.surfaces.http_auth import PAGE_COOKIE, SET_PAGE_COOKIE
from audit_mcp.usecases import reporting
from audit_mcp.usecases.service import AuditService

PAGE_PATH = "/"


def page_headers() -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(live=True, header=True),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
        "Cache-Control": "no-cache",
    }


class _Kept:
    """The last page drawn, by its tag; drawing it again waits for the one drawing now."""

    def __init__(self) -> None:
        self.tag: str | None = None
        self.body = ""
        self.lock = threading.Lock()

    def page(self, service: AuditService) -> tuple[str, str]:
        with self.lock:
            tag = reporting.page_version(service)
            if tag is None:
                service.require_state()  # raises NotFoundError, saying where it looked
                raise NotFoundError(f"no audit has started in {service.root} yet")
            if tag != self.tag:
                self.body = reporting.page_now(service, live=True)
                self.tag = tag
            return self.tag, self.body


def install_page(server: MCPServer, current: Callable[[], AuditService], security: TransportSecuritySettings) -> None:
    """Serve the current root's audit page at ``/`` of the server's HTTP application."""
    guard = TransportSecurityMiddleware(security)
    kept = _Kept()

    async def audit_page(request: Request) -> Response:
        refused = await guard.validate_request(request, is_post=request.method == "POST")
        if refused is not None:
            return refused
        if request.method not in ("GET", "HEAD"):  # checked after the guard, which answers any method as /mcp does
            return PlainTextResponse(
                "the audit page is read with GET\n", status_code=405, headers={"Allow": "GET, HEAD"}
            )
        cookie = request.scope.get("state", {}).get(SET_PAGE_COOKIE)
        if cookie is not None:
            response = Response(status_code=303, headers={**page_headers(), "Location": PAGE_PATH})
            response.set_cookie(PAGE_COOKIE, cookie, path=PAGE_PATH, httponly=True, samesite="strict")
            return response
        try:
            tag, body = await anyio.to_thread.run_sync(lambda: kept.page(current()))
        except NotFoundError as exc:
            return PlainTextResponse(
                f"{exc}\nStart an audit (the next_step tool, or `audit-mcp next-step`); this page then shows it.\n",
                status_code=404,
                headers=page_headers(),
            )
        except AuditError as exc:
            return PlainTextResponse(
                f"the audit page cannot be drawn: {exc}\n", status_code=500, headers=page_headers()
            )
        etag = f'"{tag}"'
        headers = {**page_headers(), "ETag": etag}
        if etag in [t.strip() for t in request.headers.get("if-none-match", "").split(",")]:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="text/html; charset=utf-8", headers=headers)

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    server.custom_route(PAGE_PATH, methods=methods, include_in_schema=False)(audit_page)
