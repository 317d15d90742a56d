"""The Step handed to the host: built from the planner's decision, written to disk beside its prompt."""

from __future__ import annotations

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.executable import audit_mcp_command
from audit_mcp.core.fs import write_atomic
from audit_mcp.core.models import HostCapabilities, Step
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.engine.planner import Decision, Obligation, PlannerState
from audit_mcp.engine.steps import StepContext, render_step
from audit_mcp.scheduling.limits import balanced_waves
from audit_mcp.usecases.forecasting import plan_next_run
from audit_mcp.usecases.handoff import update_handoff
from audit_mcp.usecases.workspace import Workspace


def blocked(ws: Workspace, reason: str, caps: HostCapabilities) -> StepContext:
    return StepContext(
        kind="blocked",
        status="blocked",
        run_id=None,
        reason=reason,
        caps=caps,
        root=ws.root,
        artifacts_dir=ws.artifacts_dir,
        command=audit_mcp_command(),
    )


def agent_step(
    ws: Workspace, decision: Decision, caps: HostCapabilities, state: PlannerState, config: SessionConfig
) -> StepContext:
    """The context of the Step for an obligation the agent serves (or a blocker)."""
    ctx = StepContext(
        kind="blocked",
        status="blocked",
        run_id=state.open_run_id,
        reason=decision.reason,
        caps=caps,
        root=ws.root,
        artifacts_dir=ws.artifacts_dir,
        command=audit_mcp_command(),
    )
    with ws.store.read() as tx:
        audit = tx.current_audit()
        if audit is not None:
            counts = tx.cell_counts(audit.audit_id)
            ctx.coverage = totals(counts)
            ctx.completeness = completeness(counts)
        if decision.obligation is Obligation.CAPABILITY_CHECK:
            ctx.kind, ctx.status = "capability_check", "ready"
            if audit is not None:
                # What dispatch will plan once the host says it can launch subagents, with what is known now.
                ctx.forecast = plan_next_run(ws, tx, audit, config, caps, single=False).forecast()
        elif decision.obligation is Obligation.REVIEW and state.open_run_id:
            run = tx.run(state.open_run_id)
            assert run is not None
            submitted = tx.submitted_packet_ids(run.run_id)
            ctx.kind = "single_task_fallback" if run.kind == "single" else "dispatch_review"
            ctx.status = "ready"
            ctx.plan = run.plan
            ctx.plan_path = ws.plan_path(run.run_id)
            ctx.outstanding = [p for p in run.plan["packets"] if p["packet_id"] not in submitted]
            ctx.submitted = sorted(submitted)
            # The scheduler's width, never the host's bare cap: the limits or a learned cap may be tighter.
            ctx.waves = balanced_waves(len(ctx.outstanding), run.plan.get("wave_size") or caps.max_active_subagents)
        elif decision.obligation is Obligation.PRESENT_REPORT:
            ctx.kind, ctx.status = "present_report", "complete"
            ctx.report_path = ws.report_md_path
    return ctx


def write_step(ws: Workspace, ctx: StepContext) -> Step:
    """Render the Step and its prompt, and write both where hosts that read files find them."""
    step, prompt = render_step(ctx, ws.step_prompt_path)
    write_atomic(ws.step_prompt_path, prompt)
    write_atomic(ws.step_json_path, step.model_dump_json(indent=2) + "\n")
    update_handoff(ws, step)  # written for a blocked step, removed for any other
    return step
