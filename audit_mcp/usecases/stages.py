"""One stage on its own: ``intake``, ``plan`` or ``synthesize``, for scripts and debugging.

A stage runs only when it is the obligation the planner would run next (``intake`` with ``new_audit``
also after a finished or abandoned audit; ``synthesize`` also again over a written report), so running
stages by hand never leaves a state ``next_step`` would not. Otherwise nothing runs, and the result says
what the next obligation is instead.
"""

from __future__ import annotations

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.operations import StageResult
from audit_mcp.engine import hosts
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.planner import Obligation, decide
from audit_mcp.store.records import CellState
from audit_mcp.usecases import next_step, reporting, starting
from audit_mcp.usecases.workspace import Workspace

STAGES = ("intake", "plan", "synthesize")


def run_stage(ws: Workspace, stage: str, *, new_audit: bool = False) -> StageResult:
    """Run ``stage`` if it is due; the result says what it did, or why it did not run."""
    if stage not in STAGES:
        raise ConfigError(f"unknown stage {stage!r}; the stages are {', '.join(STAGES)}")
    config = ws.config()
    lenses = [lens.lens_id for lens in resolve_lenses(config)]
    with ws.store.read() as tx:
        audit = tx.current_audit()
        caps = hosts.resolve({}, audit.host_caps if audit else {}, config.host, None, config.scheduler.wave_kind)
        seen = audit.audit_id if audit else None
        in_flight = (
            audit is not None and not audit.abandoned_at and bool(tx.cells(audit.audit_id, [CellState.ASSIGNED]))
        )
        state = next_step.planner_state(ws, tx, config, caps, fresh=new_audit and not in_flight)
    due = decide(state).obligation
    allowed = {
        "intake": due is Obligation.INTAKE,
        "plan": due is Obligation.PLAN,
        "synthesize": due in (Obligation.SYNTHESIZE, Obligation.PRESENT_REPORT),
    }[stage]
    if not allowed:
        return _result(
            ws, stage, False, f"{stage} is not due: the next obligation is {due.value} ({decide(state).reason})"
        )
    if stage == "intake":
        starting.intake(ws, config, lenses, {}, replaces=seen)
    elif stage == "plan":
        starting.plan(ws, config)
    else:
        reporting.synthesize(ws)
    with ws.store.read() as tx:
        audit = ws.require_audit(tx)
        entry = next(iter(tx.ledger(audit.audit_id, 1)), None)
    did = f"{entry['action']}: {entry['detail']}" if entry else stage
    if stage == "synthesize" and audit.synthesized_at is None:
        did = "files changed since intake went back to review, so no report was written; call next_step"
    return _result(ws, stage, True, did)


def _result(ws: Workspace, stage: str, ran: bool, detail: str) -> StageResult:
    with ws.store.read() as tx:
        audit = tx.current_audit()
        counts = tx.cell_counts(audit.audit_id) if audit else {}
    paths = (
        {
            "report": str(ws.report_md_path),
            "report_json": str(ws.report_json_path),
            "report_html": str(ws.report_html_path),
        }
        if stage == "synthesize"
        else {}
    )
    return StageResult(
        stage=stage,
        ran=ran,
        detail=detail,
        audit_id=audit.audit_id if audit else None,
        coverage=totals(counts),
        completeness=completeness(counts) if audit else "unknown",
        artifact_paths={k: v for k, v in paths.items() if ran},
        next_action="Call next_step (or run the next stage) to go on." if ran else "Nothing ran; call next_step.",
    )
