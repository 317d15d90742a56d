"""Results files produced elsewhere: ``ingest-results`` records them, ``validate-results`` only checks them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from audit_mcp.core.errors import ConfigError
from audit_mcp.surfaces.cli.common import Subparsers, emit, service_for, verb
from audit_mcp.surfaces.cli.exits import EXIT_OK, EXIT_PARTIAL, EXIT_REFUSED

if TYPE_CHECKING:
    from audit_mcp.core.models import FileReceipt


def register(sub: Subparsers) -> None:
    for name, handler, text in (
        (
            "ingest-results",
            _ingest,
            "record results files named by packet id, with submit-packet's checks (exit 2 refused, 3 some refused)",
        ),
        (
            "validate-results",
            _validate,
            "check results files as submit-packet would, recording nothing (exit 2 when refused)",
        ),
    ):
        p = verb(sub, name, handler, text)
        source = p.add_mutually_exclusive_group(required=True)
        source.add_argument(
            "--results", type=Path, metavar="FILE", help="one results file, named <packet_id>.json unless --packet-id"
        )
        source.add_argument(
            "--batch-results-dir",
            "--batch-results",
            type=Path,
            metavar="DIR",
            help="every *.json in DIR, each named by its packet id",
        )
        p.add_argument("--packet-id", help="the packet of --results, when its file name is not the packet id")
        p.add_argument("--run-id", help="the run of the packet (default: the packet's own)")


def _files(args: argparse.Namespace) -> list[Path]:
    if args.results is not None:
        return [args.results]
    if args.packet_id:
        raise ConfigError("--packet-id names the packet of one file; use it with --results FILE")
    from audit_mcp.usecases.result_files import batch_files

    return batch_files(args.batch_results_dir)


def _ingest(args: argparse.Namespace) -> int:
    return _report(args, dry_run=False)


def _validate(args: argparse.Namespace) -> int:
    return _report(args, dry_run=True)


def _report(args: argparse.Namespace, *, dry_run: bool) -> int:
    receipts = service_for(args).ingest_results(
        _files(args), run_id=args.run_id, packet_id=args.packet_id, dry_run=dry_run
    )
    accepted = sum(1 for r in receipts if r.receipt.accepted)
    if args.results is not None:
        emit(receipts[0].receipt)  # one file: the receipt itself, as submit-packet prints it
    else:
        emit(
            {
                "dry_run": dry_run,
                "accepted": accepted,
                "refused": len(receipts) - accepted,
                "files": [r.model_dump() for r in receipts],
            }
        )
    _say_refused([r for r in receipts if not r.receipt.accepted], dry_run)
    if accepted == len(receipts):
        return EXIT_OK
    return EXIT_REFUSED if accepted == 0 else EXIT_PARTIAL


def _say_refused(refused: list[FileReceipt], dry_run: bool) -> None:
    for item in refused:
        first = item.receipt.errors[0] if item.receipt.errors else None
        print(
            f"audit-mcp: {item.file}: refused with {len(item.receipt.errors)} error(s)"
            + (f", first {first.location}: {first.message}" if first else ""),
            file=sys.stderr,
        )
    if refused:
        print(
            "audit-mcp: nothing of the refused files was recorded; fix them and run it again"
            if not dry_run
            else "audit-mcp: dry run: nothing was recorded",
            file=sys.stderr,
        )
