"""The verbs of the loop a host follows: ``next-step``, ``submit-packet``, ``plan-status``, ``merge-and-ingest``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from audit_mcp.surfaces.cli.common import (
    Subparsers,
    bool_arg,
    emit,
    read_input,
    read_json,
    service_for,
    verb,
    workspace_for,
)
from audit_mcp.surfaces.cli.exits import EXIT_BLOCKED, EXIT_OK, EXIT_REFUSED
from audit_mcp.surfaces.terminal import TerminalProgress


def register(sub: Subparsers) -> None:
    p = verb(sub, "next-step", _next_step, "advance the audit and print the step to do next (exit 4 on a blocked step)")
    p.add_argument(
        "--host-can-dispatch-subagents",
        type=bool_arg,
        metavar="true|false",
        help="whether the host can launch subagents that work in parallel (the answer to a capability_check)",
    )
    p.add_argument(
        "--host-can-restrict-subagent-tools",
        type=bool_arg,
        metavar="true|false",
        help="whether the host can choose which tools a subagent gets",
    )
    p.add_argument(
        "--host-can-select-subagent-model",
        type=bool_arg,
        metavar="true|false",
        help="whether the host can choose a model per subagent (packets then name a model tier)",
    )
    p.add_argument(
        "--host-max-active-subagents", type=int, metavar="N", help="how many subagents may run at once (1-64)"
    )
    p.add_argument("--host-model", metavar="MODEL", help="the model the reviewers run, for limits and packet sizes")
    p.add_argument(
        "--lenses",
        metavar="LENS,...",
        type=_lens_list,
        help="the lenses of an audit that starts now (a first next-step, or with --new-audit), comma-separated, "
        "instead of the config's `lenses`: security, correctness, error_handling, concurrency, performance, "
        "maintainability, tests",
    )
    p.add_argument(
        "--host-dispatch-mode",
        choices=("rolling", "whole_wave"),
        help="rolling: the host starts the next subagent as soon as one finishes; whole_wave: it waits for "
        "every subagent of a wave (the run is planned, and its prompt written, for that mode)",
    )
    p.add_argument("--new-audit", action="store_true", help="start a fresh audit after a finished one")
    p.add_argument("--retry-blocked", action="store_true", help="clear a blocker whose cause is fixed")
    p.add_argument(
        "--analyzer-results",
        "--analyzer-sarif",
        dest="analyzer_sarif",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a static analyzer's output whose alerts become leads for the reviewers: SARIF from any analyzer, "
        "`bandit -f json` or `semgrep --json`, told apart by content (repeatable; read when an audit starts)",
    )
    p.add_argument(
        "--since", metavar="REF", help="audit only files changed since this git ref (for an audit that starts now)"
    )

    p = verb(sub, "submit-packet", _submit_packet, "submit one packet's results (exit 2 when refused)")
    p.add_argument("--run-id", required=True, help="the run id, as the packet prompt gives it")
    p.add_argument("--packet-id", required=True, help="the packet id, as the packet prompt gives it")
    p.add_argument(
        "--results",
        required=True,
        metavar="FILE",
        help="JSON file with the results array (or {results, usage}); '-' reads stdin",
    )

    p = verb(
        sub,
        "plan-status",
        _plan_status,
        "between waves: the run's width, cooldown and start times for the packets not launched yet",
    )
    p.add_argument("--run-id", required=True, help="the run in flight, as the dispatch step gives it")
    p.add_argument(
        "--failures",
        metavar="FILE",
        help="JSON file: [{packet_id, error}] for the packets that failed so far; '-' reads stdin",
    )
    p.add_argument(
        "--launched",
        action="append",
        default=[],
        metavar="PACKET_ID",
        help="a packet already started (repeatable, or comma-separated)",
    )

    p = verb(sub, "merge-and-ingest", _merge_and_ingest, "merge a finished run into the coverage matrix")
    p.add_argument("--run-id", required=True, help="the run to merge, as the dispatch step gives it")
    p.add_argument(
        "--failures",
        metavar="FILE",
        help="JSON file: [{packet_id, error}] for packets whose subagent failed; '-' reads stdin",
    )


def _next_step(args: argparse.Namespace) -> int:
    # The obligation loop alone, not the service's every use case (status, quota, the operator verbs).
    from audit_mcp.usecases.handoff import update_handoff
    from audit_mcp.usecases.next_step import next_step

    ws = workspace_for(args)
    bar = TerminalProgress(sys.stderr)
    step = next_step(
        ws,
        {
            "can_dispatch_subagents": args.host_can_dispatch_subagents,
            "can_restrict_subagent_tools": args.host_can_restrict_subagent_tools,
            "can_select_subagent_model": args.host_can_select_subagent_model,
            "max_active_subagents": args.host_max_active_subagents,
            "dispatch_mode": args.host_dispatch_mode,
            "model": args.host_model,
        },
        client_name="audit-mcp-cli",
        new_audit=args.new_audit,
        retry_blocked=args.retry_blocked,
        progress=bar,
        analyzer_sarif=args.analyzer_sarif,
        since=args.since,
        lenses=args.lenses,
    )
    bar.close()
    if step.step_kind == "blocked":
        update_handoff(ws, step, command=["audit-mcp", *args.argv])  # resuming repeats this command
    emit(step)
    if step.step_kind == "blocked":
        print(f"audit-mcp: blocked: {step.reason}", file=sys.stderr)
        print(
            f"audit-mcp: fix the cause, then run next-step again with --retry-blocked (read {step.prompt_path})",
            file=sys.stderr,
        )
        return EXIT_BLOCKED
    print(f"audit-mcp: step {step.step_kind}: read {step.prompt_path}", file=sys.stderr)
    return EXIT_OK


def _lens_list(text: str) -> list[str]:
    lenses = [part.strip() for part in text.split(",") if part.strip()]
    if not lenses:
        raise argparse.ArgumentTypeError("name at least one lens, e.g. --lenses security,correctness")
    return lenses


def _submit_packet(args: argparse.Namespace) -> int:
    # The use case alone, not the service's every one: a subagent's shell fallback starts this once per packet.
    from audit_mcp.usecases.submission import submit_packet

    # The bytes as they are: submit_packet decodes them and refuses malformed text with a receipt.
    receipt = submit_packet(workspace_for(args), args.run_id, args.packet_id, read_input(args.results, "/results"))
    emit(receipt)
    if not receipt.accepted:
        print(
            f"audit-mcp: submission refused with {len(receipt.errors)} error(s); fix them and submit again",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    return EXIT_OK


def _plan_status(args: argparse.Namespace) -> int:
    failures = read_json(args.failures, "/failures") if args.failures else []
    launched = [p.strip() for item in args.launched for p in item.split(",") if p.strip()]
    from audit_mcp.usecases.plan_status import plan_status  # the use case alone, as for submit-packet

    emit(plan_status(workspace_for(args), args.run_id, failures, launched))
    return EXIT_OK


def _merge_and_ingest(args: argparse.Namespace) -> int:
    service = service_for(args)
    bar = TerminalProgress(sys.stderr)
    failures = read_json(args.failures, "/failures") if args.failures else []
    summary = service.merge_and_ingest(args.run_id, failures, progress=bar)
    bar.close()
    emit(summary)
    return EXIT_OK
