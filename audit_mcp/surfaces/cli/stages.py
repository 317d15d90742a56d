"""The stage verbs: ``intake``, ``plan`` and ``synthesize``, each one obligation run on its own."""

from __future__ import annotations

import argparse
import sys

from audit_mcp.surfaces.cli.common import Subparsers, emit, service_for, verb
from audit_mcp.surfaces.cli.exits import EXIT_OK, EXIT_REFUSED


def register(sub: Subparsers) -> None:
    p = verb(sub, "intake", _stage, "read the repository into a new audit (only when that is due), print what it did")
    p.add_argument("--new-audit", action="store_true", help="start a new audit after a finished one")
    verb(sub, "plan", _stage, "build the coverage matrix of the audit (only when that is due), print what it did")
    verb(sub, "synthesize", _stage, "write the report once no task is open, print what it did")


def _stage(args: argparse.Namespace) -> int:
    result = service_for(args).run_stage(args.verb, new_audit=getattr(args, "new_audit", False))
    emit(result)
    print(f"audit-mcp: {result.stage}: {result.detail}", file=sys.stderr)
    return EXIT_OK if result.ran else EXIT_REFUSED
