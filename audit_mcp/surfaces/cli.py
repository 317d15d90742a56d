"""The command line: the same verbs as the MCP tools, JSON on stdout, messages on stderr."""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from audit_mcp.core.errors import AuditError, ConfigError
from audit_mcp.core.version import __version__
from audit_mcp.surfaces.http_auth import MIN_TOKEN_CHARS, TOKEN_ENV, BearerToken
from audit_mcp.surfaces.terminal import TerminalProgress
from audit_mcp.usecases.service import AuditService

EXIT_OK, EXIT_ERROR, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2, 64


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=None, help="repository to audit (default: the current directory)")
    parser.add_argument(
        "--artifacts-dir", type=Path, default=None, help="where state and reports live (default: <root>/.audit-mcp)"
    )
    parser.add_argument("--config", type=Path, default=None, help="session config (default: <root>/.audit-mcp.toml)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="audit-mcp",
        description="A complete, provable code audit, run through "
        "your coding agent. JSON on stdout; messages on stderr.",
    )
    parser.add_argument("--version", action="version", version=f"audit-mcp {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    _common(p)
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
        "--token",
        default=None,
        help="require 'Authorization: Bearer TOKEN' on every HTTP request (default: $AUDIT_MCP_TOKEN; "
        "prefer the variable, a flag shows in the process list)",
    )

    p = sub.add_parser("next-step", help="advance the audit and print the step to do next")
    _common(p)
    p.add_argument("--host-can-dispatch-subagents", type=_bool, metavar="true|false")
    p.add_argument("--host-can-restrict-subagent-tools", type=_bool, metavar="true|false")
    p.add_argument("--host-can-select-subagent-model", type=_bool, metavar="true|false")
    p.add_argument("--host-max-active-subagents", type=int, metavar="N")
    p.add_argument("--host-model", metavar="MODEL")
    p.add_argument("--new-audit", action="store_true", help="start a fresh audit after a finished one")
    p.add_argument("--retry-blocked", action="store_true", help="clear a blocker whose cause is fixed")
    p.add_argument(
        "--analyzer-sarif",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="SARIF of a static analyzer whose alerts become leads for the reviewers (repeatable; "
        "read when an audit starts)",
    )
    p.add_argument(
        "--since", metavar="REF", help="audit only files changed since this git ref (for an audit that starts now)"
    )

    p = sub.add_parser("submit-packet", help="submit one packet's results (exit 2 when refused)")
    _common(p)
    p.add_argument("--run-id", required=True)
    p.add_argument("--packet-id", required=True)
    p.add_argument(
        "--results",
        required=True,
        metavar="FILE",
        help="JSON file with the results array (or {results, usage}); '-' reads stdin",
    )

    p = sub.add_parser("merge-and-ingest", help="merge a finished run into the coverage matrix")
    _common(p)
    p.add_argument("--run-id", required=True)
    p.add_argument(
        "--failures",
        metavar="FILE",
        help="JSON file: [{packet_id, error}] for packets whose subagent failed; '-' reads stdin",
    )

    p = sub.add_parser("quota", help="resolved model limits, learned rate-limit state, the wave schedule")
    _common(p)
    p.add_argument("--host-model", metavar="MODEL")
    p.add_argument("--provider")

    p = sub.add_parser("status", help="coverage, runs, findings and recent events of the audit")
    _common(p)
    p.add_argument("--json", action="store_true", help="JSON (the default when stdout is not a terminal)")
    p.add_argument("--table", action="store_true", help="the readable table even when stdout is not a terminal")

    p = sub.add_parser("report", help="print the audit report")
    _common(p)
    p.add_argument(
        "--format",
        choices=("md", "json", "sarif"),
        default="md",
        help="md for people, json for tools, sarif (2.1.0) for code-scanning tools",
    )

    p = sub.add_parser("run", help="headless audit: launch a worker command per packet until the report is written")
    _common(p)
    p.add_argument(
        "--worker",
        required=True,
        metavar="TEMPLATE",
        help="shell command per packet; {prompt_path} {run_id} {packet_id} {root} {dispatch_plan} are "
        "filled in (quoted) and also set as AUDIT_MCP_* environment variables",
    )
    p.add_argument("--max-workers", type=int, default=4, help="most workers at once (default 4)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds before a worker is killed (default 1800)")
    p.add_argument(
        "--max-wait",
        type=float,
        default=900.0,
        help="longest rate-limit cooldown to wait out before stopping to resume later (default 900)",
    )
    p.add_argument("--host-model", metavar="MODEL", help="the workers' model, for limits and packet sizes")

    p = sub.add_parser("demo", help="audit the bundled fixture with a scripted reviewer, in seconds")
    p.add_argument("--dir", type=Path, default=None, help="where to copy the fixture (default: a new temp folder)")
    return parser


def _read_json(source: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {source}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc}") from exc


def _emit(value: BaseModel | dict[str, Any] | str) -> None:
    if isinstance(value, BaseModel):
        sys.stdout.write(value.model_dump_json(indent=2) + "\n")
    elif isinstance(value, dict):
        sys.stdout.write(json.dumps(value, indent=2) + "\n")
    else:
        sys.stdout.write(value if value.endswith("\n") else value + "\n")


def _serve(args: argparse.Namespace) -> int:
    from mcp.server.transport_security import TransportSecuritySettings

    from audit_mcp.surfaces.server import build_server

    root = (args.root or Path.cwd()).resolve()
    server = build_server(root, args.artifacts_dir, config_path=args.config)
    if not args.http:
        server.run()
        return EXIT_OK
    try:
        loopback = ipaddress.ip_address(args.host).is_loopback
    except ValueError:
        loopback = args.host == "localhost"
    if loopback:
        hosts = [
            f"{args.host}:{args.port}",
            f"localhost:{args.port}",
            f"127.0.0.1:{args.port}",
            args.host,
            "localhost",
            "127.0.0.1",
            *args.allowed_host,
        ]
    elif not args.allowed_host:
        raise ConfigError(
            f"binding to {args.host} exposes the server beyond this machine; pass --allowed-host "
            "with every Host header clients will use (and --allowed-origin for browsers)"
        )
    else:
        hosts = list(args.allowed_host)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=list(args.allowed_origin)
    )
    token = args.token or os.environ.get(TOKEN_ENV) or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"the bearer token is {len(token)} characters; use at least {MIN_TOKEN_CHARS} random ones")
    print(
        f"audit-mcp: serving streamable HTTP on http://{args.host}:{args.port}/mcp"
        f"{' (bearer token required)' if token else ''}",
        file=sys.stderr,
    )
    if token is None:
        server.run("streamable-http", host=args.host, port=args.port, transport_security=security)
        return EXIT_OK
    import uvicorn

    app = BearerToken(server.streamable_http_app(transport_security=security, host=args.host), token)
    uvicorn.Server(uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")).run()
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from audit_mcp.surfaces.demo import REVIEWER_LABEL, run_demo

    print(
        "audit-mcp demo: a whole audit of the bundled fixture. The reviews are SCRIPTED: they show the "
        "orchestration, not a model's judgement.",
        flush=True,
    )
    result = run_demo(args.dir, lambda line: print(line, flush=True))
    print(
        f"done: {result.runs} run(s), {result.packets} packet(s), {result.findings} finding(s) from the "
        f"{REVIEWER_LABEL}; completeness {result.completeness}"
    )
    print(f"report: {result.report_path}")
    print(f"report (JSON): {result.report_json_path}")
    print(
        "next: add the server to your coding agent (README: Adding the server to a host), or run a headless "
        "audit with `audit-mcp run --root REPO --worker '...'`"
    )
    return EXIT_OK


def _headless(args: argparse.Namespace) -> int:
    from audit_mcp.surfaces.headless import HeadlessRunner, interrupt_on_sigterm, print_result

    interrupt_on_sigterm()
    service = AuditService(args.root or Path.cwd(), args.artifacts_dir, config_path=args.config)
    runner = HeadlessRunner(
        service,
        args.worker,
        max_workers=args.max_workers,
        timeout=args.timeout,
        max_wait=args.max_wait,
        model=args.host_model,
        say=lambda line: print(f"audit-mcp: {line}", file=sys.stderr, flush=True),
    )
    result = runner.run()
    print_result(result, sys.stdout)
    print(f"audit-mcp: {result.outcome}: {result.message}", file=sys.stderr)
    if result.report_path:
        print(f"audit-mcp: report: {result.report_path}", file=sys.stderr)
    return result.exit_code


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.verb == "serve":
        return _serve(args)
    if args.verb == "demo":
        return _demo(args)
    if args.verb == "run":
        return _headless(args)
    service = AuditService(args.root or Path.cwd(), args.artifacts_dir, config_path=args.config)
    bar = TerminalProgress(sys.stderr)
    match args.verb:
        case "next-step":
            step = service.next_step(
                {
                    "can_dispatch_subagents": args.host_can_dispatch_subagents,
                    "can_restrict_subagent_tools": args.host_can_restrict_subagent_tools,
                    "can_select_subagent_model": args.host_can_select_subagent_model,
                    "max_active_subagents": args.host_max_active_subagents,
                    "model": args.host_model,
                },
                client_name="audit-mcp-cli",
                new_audit=args.new_audit,
                retry_blocked=args.retry_blocked,
                progress=bar,
                analyzer_sarif=args.analyzer_sarif,
                since=args.since,
            )
            bar.close()
            _emit(step)
            print(f"audit-mcp: step {step.step_kind}: read {step.prompt_path}", file=sys.stderr)
            return EXIT_OK
        case "submit-packet":
            payload = _read_json(args.results)
            usage = payload.get("usage") if isinstance(payload, dict) else None
            results = payload.get("results") if isinstance(payload, dict) else payload
            receipt = service.submit_packet(args.run_id, args.packet_id, results, usage)
            _emit(receipt)
            if not receipt.accepted:
                print(
                    f"audit-mcp: submission refused with {len(receipt.errors)} error(s); fix them and submit again",
                    file=sys.stderr,
                )
                return EXIT_REFUSED
            return EXIT_OK
        case "merge-and-ingest":
            failures = _read_json(args.failures) if args.failures else []
            if not isinstance(failures, list):
                raise ConfigError("--failures must hold a JSON array of {packet_id, error} objects")
            summary = service.merge_and_ingest(args.run_id, failures, progress=bar)
            bar.close()
            _emit(summary)
            return EXIT_OK
        case "quota":
            _emit(service.quota(args.host_model, args.provider))
            return EXIT_OK
        case "status":
            view = service.status()
            if args.table or (not args.json and sys.stdout.isatty()):
                from audit_mcp.surfaces.status_table import render_status

                _emit(render_status(view))
            else:
                _emit(view)
            return EXIT_OK
        case "report":
            _emit(service.report(args.format))
            return EXIT_OK
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except AuditError as exc:
        print(f"audit-mcp: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("audit-mcp: interrupted; accepted work is saved", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
