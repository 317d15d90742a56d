"""``audit-mcp serve``: the MCP server over stdio, or streamable HTTP on loopback."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from audit_mcp.core.errors import ConfigError
from audit_mcp.surfaces.cli.common import Subparsers, verb
from audit_mcp.surfaces.cli.exits import EXIT_OK

# Streamable HTTP sessions: one with no request in flight (and no open stream) for this long is closed, and
# at most this many are open at once, so thousands of abandoned sessions cannot grow the server's memory.
SESSION_IDLE_SECONDS = 600.0
MAX_SESSIONS = 1_000


def _positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected a positive number, not {text!r}")
        return value

    return parse


def register(sub: Subparsers) -> None:
    p = verb(sub, "serve", _serve, "run the MCP server (stdio by default)")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1, loopback)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (default 8765)")
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        help="Host header to accept when bound off loopback (repeatable; required there)",
    )
    p.add_argument("--allowed-origin", action="append", default=[], help="Origin to accept (repeatable)")
    p.add_argument(
        "--session-idle-timeout",
        type=_positive(float),
        default=SESSION_IDLE_SECONDS,
        metavar="SECONDS",
        help=f"close an HTTP session idle this long (default {SESSION_IDLE_SECONDS:g}; the client starts a new one)",
    )
    p.add_argument(
        "--max-sessions",
        type=_positive(int),
        default=MAX_SESSIONS,
        metavar="N",
        help=f"most HTTP sessions open at once; past it a new one is refused with 503 (default {MAX_SESSIONS})",
    )
    p.add_argument(
        "--allow-root",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="another repository a client may name as next_step's root (repeatable); any other is refused",
    )
    p.add_argument(
        "--token",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on every HTTP request (default: $AUDIT_MCP_TOKEN, else the "
        "token in your state directory's http-token file, made on first use; prefer either, a flag shows in the "
        "process list)",
    )
    p.add_argument(
        "--no-token",
        action="store_true",
        help="serve HTTP on loopback without a bearer token (any local user's process can then call every tool); "
        "refused off loopback",
    )


def _serve(args: argparse.Namespace) -> int:
    # Loaded by the one verb that serves: every other verb, --version and --help register it only. The server
    # is loaded before the helper is forked, so the helper has what intake runs loaded too.
    from audit_mcp.engine import scan_parts
    from audit_mcp.surfaces import server  # noqa: F401

    # Forked now, while this process has one thread: the server's tools run on worker threads, and intake
    # hands this helper the slices of a large repository's files it does not read itself.
    scan_parts.start_helper()
    try:
        return _serve_with(args)
    finally:
        scan_parts.stop_helper()  # a server that could not start, or one called in-process, leaves none


def _serve_with(args: argparse.Namespace) -> int:
    from audit_mcp.surfaces.http_auth import PAGE_KEY_PARAM, BearerToken, page_key
    from audit_mcp.surfaces.server import build_server

    root = (args.root or Path.cwd()).resolve()
    security, loopback = _security(args) if args.http else (None, True)
    server = build_server(
        root,
        args.artifacts_dir,
        config_path=args.config,
        allowed_roots=args.allow_root,
        store=args.store,
        audit_name=args.audit_name,
        page_security=security,
    )
    if security is None:
        from audit_mcp.surfaces.stdio import serve_stdio

        serve_stdio(server)
        return EXIT_OK
    token, where = _token(args, loopback)
    _port_is_free(args.host, args.port)
    page = f"http://{_url_host(args.host)}:{args.port}/"
    print(
        f"audit-mcp: serving streamable HTTP on http://{_url_host(args.host)}:{args.port}/mcp"
        + (f" (bearer token required: {where})" if token else " (no bearer token: --no-token)")
        + f"; the audit page at {page}"
        + (f"?{PAGE_KEY_PARAM}={page_key(token)} (the key opens the page only; keep it to yourself)" if token else ""),
        file=sys.stderr,
    )
    import uvicorn

    # The application the SDK's own streamable-HTTP runner would build, with the audit page at "/" beside "/mcp".
    app: Any = server.streamable_http_app(
        transport_security=security,
        host=args.host,
        session_idle_timeout=args.session_idle_timeout,
        max_sessions=args.max_sessions,
    )
    if token is not None:
        app = BearerToken(app, token)
    uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")).run()
    return EXIT_OK


def _security(args: argparse.Namespace) -> tuple[Any, bool]:
    """The Host/Origin protection of every HTTP request (``/mcp`` and the page), and whether the address is
    loopback: this machine's names there, elsewhere only the hosts the user listed."""
    import ipaddress

    from mcp.server.transport_security import TransportSecuritySettings

    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    origins = list(args.allowed_origin)
    if loopback:
        hosts = [
            f"{args.host}:{args.port}",
            f"localhost:{args.port}",
            f"127.0.0.1:{args.port}",
            f"[::1]:{args.port}",
            args.host,
            "localhost",
            "127.0.0.1",
            "[::1]",
            *args.allowed_host,
        ]
        # The server's own origins (a page it serves, the Inspector opened on it) are this machine's.
        origins += [f"http://{name}:{args.port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    elif not args.allowed_host:
        raise ConfigError(
            f"binding to {args.host} exposes the server beyond this machine; pass --allowed-host "
            "with every Host header clients will use (and --allowed-origin for browsers)"
        )
    else:
        hosts = list(args.allowed_host)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=list(dict.fromkeys(origins))
    )
    return security, loopback


def _token(args: argparse.Namespace, loopback: bool) -> tuple[str | None, str]:
    """The bearer token every HTTP request must carry, and where it comes from; ``None`` only with
    ``--no-token`` on loopback."""
    from audit_mcp.surfaces.http_auth import MIN_TOKEN_CHARS, TOKEN_ENV, user_token

    if args.no_token:
        if args.token:
            raise ConfigError("--no-token and --token contradict each other; pass one")
        if not loopback:
            raise ConfigError(
                f"--no-token is refused on {args.host}: a server reachable beyond this machine needs a bearer token "
                "(drop --no-token: the token in your state directory is used, or pass one with AUDIT_MCP_TOKEN)"
            )
        return None, "none"
    if args.token:
        token, where = args.token, "the --token value"
    elif os.environ.get(TOKEN_ENV):
        token, where = os.environ[TOKEN_ENV], f"${TOKEN_ENV}"
    else:
        token, path = user_token()
        return token, f"the token in {path}"
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the bearer token is {len(token)} characters; use at least {MIN_TOKEN_CHARS} random ones")
    return token, where


def _url_host(host: str) -> str:
    """``host`` as a URL names it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _port_is_free(host: str, port: int) -> None:
    """Refuse before saying "serving" when the port cannot be bound (another server holds it, say)."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve --host {host}: {exc.strerror}") from exc
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {host} is already in use (another audit-mcp serve?); stop it, or pass "
                    "--port with a free one"
                ) from exc
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
