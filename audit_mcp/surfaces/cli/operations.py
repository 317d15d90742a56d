"""The operator's verbs: ``explain-task``, ``requeue``, ``abandon``, ``cleanup``."""

from __future__ import annotations

import argparse
import sys

from audit_mcp.surfaces.cli.common import Subparsers, emit, service_for, verb
from audit_mcp.surfaces.cli.exits import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE


def register(sub: Subparsers) -> None:
    p = verb(
        sub,
        "explain-task",
        _explain,
        "one task: file, lines, lens, attempts, packets, receipts, failures, and why it is open or closed; or, "
        "with --file, every task of a file with its state",
    )
    p.add_argument(
        "task_id", metavar="TASK_ID", nargs="?", help="a task id such as T00012 (dispatch plan, report gaps)"
    )
    p.add_argument(
        "--file", default=None, metavar="PATH", help="list every task of this file (repo-relative) with its state"
    )

    p = verb(sub, "requeue", _requeue, "send files, lenses, tasks or findings back to review in the next run")
    p.add_argument("--reason", required=True, help="what the next review should look at; its packet prompt says it")
    p.add_argument(
        "--file", action="append", default=[], metavar="PATH", help="a file, or a glob such as 'app/**' (repeatable)"
    )
    p.add_argument("--lens", action="append", default=[], metavar="LENS", help="a lens; with --file, narrows it")
    p.add_argument("--task", action="append", default=[], metavar="TASK_ID", help="a task id (repeatable)")
    p.add_argument(
        "--finding",
        action="append",
        default=[],
        metavar="ID",
        help="a finding's report id (F003) or fingerprint: its cells under the lenses that reported it",
    )

    p = verb(sub, "abandon", _abandon, "end the audit in flight (its ledger is kept); the next next-step starts anew")
    p.add_argument("--reason", default="", help="why, for the ledger")

    p = verb(
        sub,
        "cleanup",
        _cleanup,
        "remove finished runs' prompts, plans and results files and orphan temporary files (never the database, "
        "the ledger or the report)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    p.add_argument("--keep-runs", type=int, default=0, metavar="N", help="keep the files of the N latest finished runs")
    p.add_argument("--logs", action="store_true", help="remove finished runs' worker logs too")


def _explain(args: argparse.Namespace) -> int:
    if (args.task_id is None) == (args.file is None):
        print("audit-mcp: explain-task takes a TASK_ID, or --file PATH (one of them)", file=sys.stderr)
        return EXIT_USAGE
    if args.file is not None:
        from audit_mcp.usecases.explaining import file_tasks

        listed = file_tasks(service_for(args), args.file)
        emit(listed)
        states = ", ".join(f"{n} {state}" for state, n in sorted(listed.by_state.items())) or "no task"
        print(f"audit-mcp: {listed.file}: {states}", file=sys.stderr)
        return EXIT_OK
    explained = service_for(args).explain_task(args.task_id)
    emit(explained)
    print(f"audit-mcp: {explained.task_id}: {explained.why}", file=sys.stderr)
    return EXIT_OK


def _requeue(args: argparse.Namespace) -> int:
    result = service_for(args).requeue(
        args.reason, files=args.file, lenses=args.lens, tasks=args.task, findings=args.finding
    )
    emit(result)
    print(
        f"audit-mcp: {len(result.requeued)} task(s) back to review, {len(result.already_pending)} already pending, "
        f"{len(result.not_requeued)} left as they are",
        file=sys.stderr,
    )
    return EXIT_PARTIAL if result.not_requeued else EXIT_OK


def _abandon(args: argparse.Namespace) -> int:
    emit(service_for(args).abandon(args.reason))
    return EXIT_OK


def _cleanup(args: argparse.Namespace) -> int:
    result = service_for(args).cleanup(keep_runs=max(0, args.keep_runs), logs=args.logs, dry_run=args.dry_run)
    emit(result)
    verb_done = "would free" if result.dry_run else "freed"
    print(f"audit-mcp: {len(result.removed)} path(s), {verb_done} {result.bytes_freed} bytes", file=sys.stderr)
    return EXIT_OK
