"""audit_status: coverage by lens and state, runs and waves, findings, gaps, and what remains."""

from __future__ import annotations

from typing import Any

from audit_mcp.core.models import StatusView
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.findings.synthesis import synthesize
from audit_mcp.store.records import CellState
from audit_mcp.usecases.quota import quota_view
from audit_mcp.usecases.workspace import Workspace

MAX_GAPS_LISTED = 20


def status_view(ws: Workspace) -> StatusView:
    """Coverage, runs, findings, gaps, the blocker, recent events and what remains."""
    with ws.store.read() as tx:
        audit = tx.current_audit()
        if audit is None:
            return StatusView(
                repo_root=str(ws.root),
                artifacts_dir=str(ws.artifacts_dir),
                audit_id=None,
                completeness="unknown",
                coverage={},
                coverage_by_lens={},
                findings_by_severity={},
                runs=[],
                skipped_files=0,
                blocker=None,
                ledger=[],
            )
        counts = tx.cell_counts(audit.audit_id)
        runs: list[dict[str, Any]] = []
        waves = tx.run_waves(audit.audit_id)
        for run in tx.runs(audit.audit_id, plan=False):
            packets = tx.packets(run.run_id)
            runs.append(
                {
                    "run_id": run.run_id,
                    "kind": run.kind,
                    "state": run.state,
                    "created_at": run.created_at,
                    "packets": len(packets),
                    "submitted": len(tx.submitted_packet_ids(run.run_id)),
                    "waves": waves.get(run.run_id, []),
                }
            )
        synthesis = synthesize(tx.findings(audit.audit_id))
        gap_cells = tx.cells(audit.audit_id, [CellState.FAILED, CellState.SKIPPED])
        open_run = next((r for r in runs if r["state"] == "open"), None)
        view = StatusView(
            repo_root=str(ws.root),
            artifacts_dir=str(ws.artifacts_dir),
            audit_id=audit.audit_id,
            completeness=completeness(counts),
            coverage=totals(counts),
            coverage_by_lens=tx.cell_counts_by_lens(audit.audit_id),
            findings_by_severity=synthesis.by_severity(),
            runs=runs,
            skipped_files=tx.file_counts(audit.audit_id).get("skipped", 0),
            blocker=audit.blocker,
            abandoned=f"abandoned at {audit.abandoned_at}: {audit.abandon_reason}" if audit.abandoned_at else None,
            ledger=tx.ledger(audit.audit_id, 20),
            gaps=[
                {
                    "task_id": c.task_id,
                    "file": c.path,
                    "lines": f"{c.start_line}-{c.end_line}",
                    "lens": c.lens,
                    "state": c.state,
                    "reason": c.reason,
                }
                for c in gap_cells[:MAX_GAPS_LISTED]
            ],
            gaps_total=len(gap_cells),
        )
    schedule = quota_view(ws, None, None).schedule
    view.forecast = {
        "open_run": open_run["run_id"] if open_run else None,
        "open_run_packets_outstanding": open_run["packets"] - open_run["submitted"] if open_run else 0,
        "pending_cells": schedule["pending_cells"],
        "next_run_packets": schedule["packets"],
        "next_run_waves": schedule["waves"],
        "cooldown_until": schedule["cooldown_until"],
        "estimated_tokens": schedule["estimated_tokens"],
    }
    return view
