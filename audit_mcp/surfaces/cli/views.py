"""The read-only views: ``quota``, ``status``, ``report``, ``ledger``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from audit_mcp.core.escape import terminal
from audit_mcp.core.fs import write_atomic
from audit_mcp.surfaces.cli.common import Subparsers, emit, service_for, verb, workspace_for
from audit_mcp.surfaces.cli.exits import EXIT_OK


def register(sub: Subparsers) -> None:
    p = verb(sub, "quota", _quota, "resolved model limits, learned rate-limit state, the wave schedule")
    p.add_argument(
        "--host-model", metavar="MODEL", help="the reviewers' model (default: the audit's, else the config's)"
    )
    p.add_argument(
        "--provider", help="the provider whose limits apply (anthropic, openai, ...; default: from the model)"
    )
    p.add_argument(
        "--quota-probe",
        choices=("auto", "never", "force"),
        help="ask the provider's models endpoint about --host-model first, as `run --quota-probe` does, and learn "
        "the limits its rate-limit headers state: auto (when its API key is set), never, or force (exit 1 when "
        "nothing can be read); the output's probe block says what was asked and learned, or why nothing "
        "(default: [scheduler] probe, whose readings are shown but not learned)",
    )

    p = verb(sub, "status", _status, "coverage, runs, findings and recent events of the audit")
    p.add_argument("--json", action="store_true", help="JSON (the default when stdout is not a terminal)")
    p.add_argument("--table", action="store_true", help="the readable table even when stdout is not a terminal")

    p = verb(sub, "report", _report, "print the audit report and write it to report/report.<format>")
    p.add_argument(
        "--format",
        choices=("md", "json", "sarif", "html"),
        default="md",
        help="md for people, json for tools, sarif (2.1.0) for code-scanning tools, html: one self-contained "
        "page (coverage map, findings to sort and filter, runs) for a browser, printed only when stdout is not "
        "a terminal",
    )
    p.add_argument(
        "--drop-refuted",
        action="store_true",
        help="SARIF only: leave refuted findings out (GitHub code scanning ignores suppressions)",
    )
    p.add_argument(
        "--audit",
        type=int,
        default=None,
        metavar="N",
        help="the report of audit N (status lists them); default: the current audit's, or after an abandoned "
        "audit the latest finished one's",
    )
    p.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the report to FILE (its folders made), e.g. for a CI upload step; default: "
        "report/report.<format> in the artifacts directory",
    )

    p = verb(
        sub,
        "ledger",
        _ledger,
        "export the whole run ledger as JSON lines, oldest first: who did what and when, each headless worker's "
        "packet, start, end, exit status, provider and failure class",
    )
    p.add_argument(
        "--audit",
        type=int,
        metavar="N",
        help="only audit N's entries (default: every audit's; `status` names the current audit's id)",
    )


def _quota(args: argparse.Namespace) -> int:
    from audit_mcp.usecases.quota import quota_view  # the use case alone: the service's others are not loaded

    emit(quota_view(workspace_for(args), args.host_model, args.provider, args.quota_probe))
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from audit_mcp.usecases.status import status_view

    view = status_view(workspace_for(args))
    if args.table or (not args.json and sys.stdout.isatty()):
        from audit_mcp.surfaces.status_table import render_status

        emit(render_status(view))
    else:
        if view.message:
            print(f"audit-mcp: {view.message}", file=sys.stderr)
        emit(view)
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    service = service_for(args)
    if args.drop_refuted:  # SARIF for uploads that ignore suppressions: the written report stays whole
        text = service.report(args.format, drop_refuted=True, audit_id=args.audit)
        if args.output is not None:
            write_atomic(args.output, text)
            print(f"audit-mcp: SARIF without refuted findings written to {args.output}", file=sys.stderr)
        emit(text)
        return EXIT_OK
    from audit_mcp.usecases.reporting import write_report

    text, path, provisional, note = write_report(service, args.format, audit_id=args.audit, output=args.output)
    page = args.format == "html"
    if not (page and sys.stdout.isatty()):  # a page on a terminal is a wall of markup: only where it is
        emit(text)
    state = "provisional: the audit has not finished" if provisional else "final"
    if note:
        print(f"audit-mcp: {note}", file=sys.stderr)
    print(f"audit-mcp: report ({state}) written to {path}", file=sys.stderr)
    if page:
        print(f"audit-mcp: open {path.resolve().as_uri()} in a browser", file=sys.stderr)
    return EXIT_OK


def _ledger(args: argparse.Namespace) -> int:
    from audit_mcp.usecases.ledger_log import export

    tty = sys.stdout.isatty()
    for entry in export(workspace_for(args), args.audit):
        text = json.dumps(entry, separators=(",", ":")) + "\n"
        sys.stdout.write(terminal(text) if tty else text)  # reviewer and worker text can hold escapes
    return EXIT_OK
