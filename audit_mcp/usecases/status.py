"""audit_status: coverage by lens and state, runs and waves, findings, gaps, skipped files, and what remains.

The forecast of what remains is the next run as dispatch will plan it (``forecasting``). A folder never
audited gets an empty view, and nothing is created in it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.executable import command_line
from audit_mcp.core.models import StatusView
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.findings.assessment import assess, verification_counts
from audit_mcp.findings.synthesis import synthesize
from audit_mcp.store.records import CONTEXT_TASK_ID, CellKind, CellState
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import memo
from audit_mcp.usecases.audit_forecast import for_audit
from audit_mcp.usecases.forecasting import plan_next_run, remembered_caps
from audit_mcp.usecases.quota import open_obligations
from audit_mcp.usecases.verifying import judged_same, subjects_due
from audit_mcp.usecases.workspace import Workspace

MAX_GAPS_LISTED = 20
MAX_SKIPPED_LISTED = 50


def status_view(ws: Workspace) -> StatusView:
    """Coverage, runs, findings, gaps, skipped files, the blocker, recent events and what remains."""
    config = ws.config()
    with ws.store_if_any() as tx:
        audit = tx.current_audit() if tx is not None else None
        if tx is None or audit is None:
            return StatusView(
                repo_root=str(ws.root),
                artifacts_dir=str(ws.artifacts_dir),
                audit_id=None,
                message=(
                    f"no audit has started for {ws.root} (its state would be in {ws.artifacts_dir}). Start one "
                    f"with `{command_line('next-step', '--root', str(ws.root))}`, or over MCP call next_step; "
                    f"`{command_line('quota', '--root', str(ws.root))}` forecasts it first."
                ),
                completeness="unknown",
                coverage={},
                coverage_by_lens={},
                findings_by_severity={},
                runs=[],
                skipped_files=0,
                blocker=None,
                ledger=[],
            )
        counts = memo.cell_counts(ws.memo, tx, audit.audit_id)
        runs: list[dict[str, Any]] = []
        waves = tx.run_waves(audit.audit_id)
        for run in tx.runs(audit.audit_id, plan=False):
            packets = tx.packets(run.run_id)
            runs.append(
                {
                    "run_id": run.run_id,
                    "kind": run.kind,
                    "packet_kind": packets[0].kind if packets else "review",
                    "state": run.state,
                    "created_at": run.created_at,
                    "packets": len(packets),
                    "submitted": len(tx.submitted_packet_ids(run.run_id)),
                    "waves": waves.get(run.run_id, []),
                }
            )
        opinions, evidence = tx.finding_verdicts(audit.audit_id), tx.runtime_evidence(audit.audit_id)
        merged = synthesize(tx.findings(audit.audit_id), same=judged_same(opinions))
        due = len(subjects_due(tx, audit.audit_id, config, merged)) if audit.synthesized_at is None else 0
        synthesis = assess(merged, opinions, evidence)
        by_kind = memo.cell_counts_by_kind(ws.memo, tx, audit.audit_id)
        obligations = _obligations(
            tx, audit.audit_id, config, due, verification_counts(synthesis), len(evidence), by_kind
        )
        gap_cells = tx.cells(audit.audit_id, [CellState.FAILED, CellState.SKIPPED])
        skipped = ws.memo.get(
            "skipped_files", (tx.queue_generation(), audit.audit_id), lambda: tx.files(audit.audit_id, scope="skipped")
        )
        open_run = next((r for r in runs if r["state"] == "open"), None)
        caps = remembered_caps(config, audit.host_caps)
        next_run = plan_next_run(ws, tx, audit, config, caps, single=caps.can_dispatch_subagents is False, reuse=True)
        whole = for_audit(ws, tx, audit, config, caps, next_run=next_run)
        view = StatusView(
            repo_root=str(ws.root),
            artifacts_dir=str(ws.artifacts_dir),
            audit_id=audit.audit_id,
            completeness=completeness(counts),
            coverage=totals(counts),
            coverage_by_lens=memo.cell_counts_by_lens(ws.memo, tx, audit.audit_id),
            findings_by_severity=synthesis.by_severity(),
            runs=runs,
            skipped_files=len(skipped),
            skipped=[{"file": f.path, "kind": f.kind, "reason": f.skip_reason} for f in skipped[:MAX_SKIPPED_LISTED]],
            skipped_by_reason=dict(Counter(_reason_class(f.skip_reason) for f in skipped).most_common()),
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
            obligations=obligations,
            refuted=len(synthesis.refuted),
        )
    forecast = next_run.forecast()
    view.forecast = {
        "open_run": open_run["run_id"] if open_run else None,
        "open_run_packets_outstanding": open_run["packets"] - open_run["submitted"] if open_run else 0,
        "pending_cells": forecast["pending_cells"],
        "next_run_packets": forecast["packets"],
        "next_run_waves": forecast["wave_sizes"],
        "cooldown_until": forecast["cooldown_until"],
        "estimated_tokens": forecast["estimated_tokens"],
        "estimated_input_tokens": forecast["estimated_input_tokens"],
        "estimated_output_tokens": forecast["estimated_output_tokens"],
        "time_range": forecast["time_range"],
        "cells_for_later_runs": forecast["cells_for_later_runs"],
        "obligations": open_obligations(by_kind),
        "verification_expected": obligations["verification"]["due"],
        "audit": whole,
    }
    return view


def _reason_class(reason: str | None) -> str:
    """A skip reason without its particulars, to count files by why they were skipped."""
    text = reason or "no reason recorded"
    for mark in (":", " ("):
        head = text.split(mark, 1)[0]
        if len(head) < len(text):
            return head
    return text


def _obligations(
    tx: Tx,
    audit_id: int,
    config: SessionConfig,
    due: int,
    verdicts: dict[str, int],
    evidence: int,
    by_kind: dict[str, dict[str, int]],
) -> dict[str, Any]:
    """Each obligation of the audit: its cells by state, and what it produced."""
    threat = tx.threat_model(audit_id)
    context = tx.cells_by_id(audit_id, [CONTEXT_TASK_ID]).get(CONTEXT_TASK_ID)
    return {
        "context": {
            "cells": totals(by_kind.get(CellKind.CONTEXT, {})),
            "threat_model": threat.origin if threat else None,
            "note": None if threat else (context.reason if context else "no context cell in this audit"),
        },
        "review": {"cells": totals(by_kind.get(CellKind.REVIEW, {}))},
        "verification": {
            "cells": totals(by_kind.get(CellKind.VERIFY, {})),
            "enabled": config.verification_pass,
            "threshold": config.verify_severity,
            "due": due,
            "findings_by_status": verdicts,
        },
        "runtime_evidence": {"attached": evidence},
    }
