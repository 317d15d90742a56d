"""abandon: end the audit in flight, keeping its ledger, findings and runs for the record.

Its open run is closed (late submissions are refused by name), the cells it held go back to pending,
and the next ``next_step`` starts a new audit. An abandoned audit is never a baseline for comparison.
"""

from __future__ import annotations

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.operations import AbandonResult
from audit_mcp.core.text import clean_text
from audit_mcp.store.records import CellState
from audit_mcp.usecases.workspace import Workspace

MAX_REASON_CHARS = 500


def abandon(ws: Workspace, reason: str, *, actor: str = "person") -> AbandonResult:
    why = clean_text(" ".join(str(reason).split()))[:MAX_REASON_CHARS] or "abandoned without a reason given"
    now = ws.now()
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        if audit.abandoned_at:
            raise ConfigError(f"audit {audit.audit_id} was already abandoned at {audit.abandoned_at}")
        if audit.synthesized_at and not tx.cells(audit.audit_id, [CellState.PENDING, CellState.ASSIGNED]):
            raise ConfigError(
                f"audit {audit.audit_id} is finished (its report is written); there is nothing in flight to "
                "abandon. Start another with next_step new_audit=true (`audit-mcp next-step --new-audit`)"
            )
        closed = [r.run_id for r in tx.runs(audit.audit_id, plan=False) if r.state == "open"]
        for run_id in closed:
            tx.abandon_run(run_id, now)
        held = tx.cells(audit.audit_id, [CellState.ASSIGNED])
        for cell in held:
            tx.update_cell(audit.audit_id, cell.task_id, state=CellState.PENDING, now=now, reason="audit abandoned")
        tx.abandon_audit(audit.audit_id, now, why)
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor=actor,
            action="abandon",
            detail=f"{why}; run(s) closed: {', '.join(closed) or 'none'}; {len(held)} task(s) released",
            outcome="abandoned",
        )
    return AbandonResult(
        audit_id=audit.audit_id,
        reason=why,
        runs_closed=closed,
        tasks_released=len(held),
        next_action="The audit is ended and its ledger kept (`audit-mcp status` shows it). The next next_step "
        "starts a new audit.",
    )
