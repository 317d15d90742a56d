"""The verbs that run a whole audit by themselves: ``run`` (headless workers) and ``demo``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from audit_mcp.surfaces.cli.common import Subparsers, say, service_for, verb
from audit_mcp.surfaces.cli.exits import EXIT_OK

# workers.WORKER_MODES, written out so that registering `run` does not load the worker launcher (its
# subprocess and signal handling) into every verb; a test pins the two equal.
WORKER_MODES = ("submit", "file")


def register(sub: Subparsers) -> None:
    p = verb(sub, "run", _run, "headless audit: launch a worker command per packet until the report is written")
    p.add_argument(
        "--worker",
        required=True,
        metavar="TEMPLATE",
        help="shell command per packet; {prompt_path} {run_id} {packet_id} {root} {dispatch_plan} {results_path} are "
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
    p.add_argument(
        "--worker-mode",
        choices=WORKER_MODES,
        default="submit",
        help="submit: workers run `audit-mcp submit-packet` (default); file: workers only write their results "
        "file ({results_path}), which is checked and recorded when they exit",
    )
    p.add_argument(
        "--quota-probe",
        choices=("auto", "never", "force"),
        help="before planning, ask the provider's models endpoint about --host-model and learn the limits its "
        "rate-limit headers state: auto (when its API key is set), never, or force (refuse to start without "
        "them); default: [scheduler] probe, else never",
    )
    p.add_argument("--since", metavar="REF", help="for an audit that starts now: only files changed since this git ref")
    p.add_argument(
        "--new-audit",
        action="store_true",
        help="start a new audit when the last one finished (unchanged cells carry their reviews and findings "
        "forward); an audit still in flight is resumed instead, so the same command goes on after a stop",
    )
    p.add_argument(
        "--max-runs",
        type=int,
        metavar="N",
        help="stop after N review runs (exit code 3 while work is open; the same command goes on)",
    )
    p.add_argument(
        "--retry-blocked",
        action="store_true",
        help="clear the audit's blocker first (after fixing its cause, e.g. an expired API key), then go on",
    )
    p.add_argument(
        "--results",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a results file produced elsewhere, named <packet_id>.json, recorded before the run goes on (as "
        "ingest-results does; a refused one is reported and its packet goes to a worker); repeatable",
    )
    p.add_argument(
        "--batch-results-dir",
        type=Path,
        metavar="DIR",
        help="a folder where results produced elsewhere arrive as <packet_id>.json: each is recorded before the "
        "run goes on and, while it runs, instead of launching a worker for its packet",
    )

    p = verb(sub, "demo", _demo, "audit the bundled fixture with a scripted reviewer, in seconds", common=False)
    p.add_argument("--dir", type=Path, default=None, help="where to copy the fixture (default: a new temp folder)")


def _run(args: argparse.Namespace) -> int:
    from audit_mcp.surfaces.headless import HeadlessRunner, interrupt_on_sigterm, print_result
    from audit_mcp.surfaces.run_progress import StderrLines

    interrupt_on_sigterm()
    lines = StderrLines(sys.stderr)
    runner = HeadlessRunner(
        service_for(args),
        args.worker,
        max_workers=args.max_workers,
        timeout=args.timeout,
        max_wait=args.max_wait,
        model=args.host_model,
        worker_mode=args.worker_mode,
        since=args.since,
        new_audit=args.new_audit,
        max_runs=args.max_runs,
        retry_blocked=args.retry_blocked,
        quota_probe=args.quota_probe,
        command=["audit-mcp", *args.argv],
        say=lines.say,
        progress=lines.progress,
        results=args.results,
        results_dir=args.batch_results_dir,
    )
    try:
        result = runner.run()
    finally:
        lines.close()
    print_result(result, sys.stdout)
    say(runner.tracker.final(result.outcome))
    say(f"{result.outcome}: {result.message}")
    if result.report_path:
        say(f"report: {result.report_path}")
    if result.resume_command and result.outcome != "interrupted":  # an interrupted run's message names it
        say(f"to go on: {result.resume_command}")
    return result.exit_code


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
    print(f"report (a page for a browser): {result.report_json_path.with_name('report.html')}")
    print(
        "next: add the server to your coding agent (docs/hosts.md), or run a headless "
        "audit with `audit-mcp run --root REPO --worker '...'`"
    )
    return EXIT_OK
