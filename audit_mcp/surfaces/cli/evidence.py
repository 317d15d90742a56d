"""The verb that attaches what running the code showed to a finding: ``runtime-evidence``."""

from __future__ import annotations

import argparse
import sys

from audit_mcp.core.executable import command_line
from audit_mcp.surfaces.cli.common import Subparsers, emit, read_input, service_for, verb
from audit_mcp.surfaces.cli.exits import EXIT_OK, EXIT_USAGE


def register(sub: Subparsers) -> None:
    p = verb(
        sub,
        "runtime-evidence",
        _runtime_evidence,
        "attach evidence from running the code (a reproduction, a failing test, a crash log) to a finding",
    )
    p.add_argument(
        "--finding", required=True, metavar="F", help="the finding's id in the report (F003) or a fingerprint"
    )
    p.add_argument(
        "--file",
        metavar="FILE",
        help="the output to attach: a command's output, a test report, a crash log; '-' reads stdin",
    )
    p.add_argument("--verdict", choices=("reproduced", "not_reproduced"), help="what running the code showed")
    p.add_argument("--command", metavar="CMD", help="the exact command that produced the output")
    p.add_argument(
        "--kind",
        choices=("reproduction", "failing_test", "crash_log", "log"),
        default="reproduction",
        help="what the output is (default reproduction)",
    )
    p.add_argument(
        "--instructions",
        action="store_true",
        help="print how to check the finding by running the code safely, instead of attaching anything",
    )


def _runtime_evidence(args: argparse.Namespace) -> int:
    service = service_for(args)
    if args.instructions:
        cli = command_line("runtime-evidence", "--root", str(service.root), "--finding", args.finding.strip())
        emit(service.runtime_instructions(args.finding, cli))
        return EXIT_OK
    if args.file is None or args.verdict is None:
        print("audit-mcp: runtime-evidence needs --file and --verdict (or --instructions)", file=sys.stderr)
        return EXIT_USAGE
    output = read_input(args.file, "/output")
    receipt = service.runtime_evidence(
        args.finding,
        args.verdict,
        output,
        command=args.command,
        kind=args.kind,
        source=None if args.file == "-" else args.file,
        added_by="cli",
    )
    emit(receipt)
    return EXIT_OK
