"""The read-only views: ``quota``, ``status``, ``report``."""

from __future__ import annotations

import argparse
import sys

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

    p = verb(sub, "status", _status, "coverage, runs, findings and recent events of the audit")
    p.add_argument("--json", action="store_true", help="JSON (the default when stdout is not a terminal)")
    p.add_argument("--table", action="store_true", help="the readable table even when stdout is not a terminal")

    p = verb(sub, "report", _report, "print the audit report and write it to report/report.<format>")
    p.add_argument(
        "--format",
        choices=("md", "json", "sarif"),
        default="md",
        help="md for people, json for tools, sarif (2.1.0) for code-scanning tools",
    )
    p.add_argument(
        "--drop-refuted",
        action="store_true",
        help="SARIF only: leave refuted findings out (GitHub code scanning ignores suppressions)",
    )


def _quota(args: argparse.Namespace) -> int:
    from audit_mcp.usecases.quota import quota_view  # the use case alone: the service's others are not loaded

    emit(quota_view(workspace_for(args), args.host_model, args.provider))
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    from audit_mcp.usecases.status import status_view

    view = status_view(workspace_for(args))
    if args.table or (not args.json and sys.stdout.isatty()):
        from audit_mcp.surfaces.status_table import render_status

        emit(render_status(view))
    else:
        emit(view)
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    if args.drop_refuted:  # SARIF for uploads that ignore suppressions: printed, the written report unchanged
        emit(service_for(args).report(args.format, drop_refuted=True))
        return EXIT_OK
    text, path, provisional = service_for(args).write_report(args.format)
    emit(text)
    state = "provisional: the audit has not finished" if provisional else "final"
    print(f"audit-mcp: report ({state}) written to {path}", file=sys.stderr)
    return EXIT_OK
