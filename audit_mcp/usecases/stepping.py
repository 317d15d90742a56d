"""The Step handed to the host: built from the planner's decision, written to disk beside its prompt."""

from __future__ import annotations

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.escape import md_inline
from audit_mcp.core.executable import audit_mcp_command
from audit_mcp.core.fs import write_atomic
from audit_mcp.core.models import HostCapabilities, Step
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.engine.planner import Decision, Obligation, PlannerState
from audit_mcp.engine.steps import StepContext, render_step
from audit_mcp.scheduling.limits import waves_for
from audit_mcp.scheduling.pacing import iso, schedule_view
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import claiming, packet_render, reporting, snapshot
from audit_mcp.usecases.audit_forecast import for_audit, record_first
from audit_mcp.usecases.forecasting import plan_next_run
from audit_mcp.usecases.handoff import update_handoff
from audit_mcp.usecases.inflight import InFlight, in_flight
from audit_mcp.usecases.rates import cooldown
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
    holding = None
    if decision.obligation is Obligation.REVIEW and state.open_run_id and claiming.shared(ws):
        with ws.store.read() as tx:
            kind = run.kind if (run := tx.run(state.open_run_id, plan=False)) else "dispatch"
            audit = tx.current_audit()
        if audit is not None and (differs := snapshot.difference(ws, audit)) is not None:
            return blocked(ws, differs, caps)
        holding = claiming.take(ws, state.open_run_id, 1 if kind == "single" else caps.max_active_subagents)
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
            ctx.obligations = tx.cell_counts_by_kind(audit.audit_id)
        if decision.obligation is Obligation.CAPABILITY_CHECK:
            ctx.kind, ctx.status = "capability_check", "ready"
            if audit is not None:
                # What dispatch will plan once the host says it can launch subagents, with what is known now.
                upcoming = plan_next_run(ws, tx, audit, config, caps, single=False, reuse=True)
                ctx.forecast = upcoming.forecast()
                if not tx.runs(audit.audit_id, plan=False):
                    ctx.audit_forecast = for_audit(ws, tx, audit, config, caps, next_run=upcoming)
        elif decision.obligation is Obligation.REVIEW and state.open_run_id:
            run = tx.run(state.open_run_id)
            assert run is not None
            submitted = tx.submitted_packet_ids(run.run_id)
            ctx.kind = "single_task_fallback" if run.kind == "single" else "dispatch_review"
            ctx.status = "ready"
            ctx.plan = run.plan
            ctx.plan_path = ws.plan_path(run.run_id)
            ctx.outstanding = [p for p in run.plan["packets"] if p["packet_id"] not in submitted]
            if ctx.kind == "single_task_fallback" and ctx.outstanding:
                # The one packet this host reviews itself: its results file, as its prompt names it.
                first = ctx.outstanding[0]
                results = str(ws.results_path(run.run_id, first["packet_id"]))
                ctx.outstanding = [first | {"results_path": results}, *ctx.outstanding[1:]]
            ctx.submitted = sorted(submitted)
            if holding is not None:  # a shared run: only the packets this host holds, with prompts it rendered
                mine = set(holding.mine)
                ctx.outstanding = [
                    p | {"prompt_path": str(ws.packet_prompt_path(run.run_id, p["packet_id"]))}
                    for p in ctx.outstanding
                    if p["packet_id"] in mine
                ]
                if not ctx.outstanding:
                    ctx.kind, ctx.reason, ctx.retry_after_seconds = _wait(ws, run.run_id, holding)
            # The scheduler's width, never the host's bare cap: the limits or a learned cap may be tighter.
            mode = (run.plan.get("schedule") or {}).get("dispatch_mode") or caps.dispatch_mode
            ctx.waves = waves_for(len(ctx.outstanding), run.plan.get("wave_size") or caps.max_active_subagents, mode)
            if run.seq == 1 and not submitted and audit is not None:  # the first dispatch: the whole audit
                ctx.audit_forecast = for_audit(ws, tx, audit, config, caps)
            flight = in_flight(ws, ws.config(), tx, run.run_id)
            if flight is not None and run.kind != "single":
                _live(ws, tx, ctx, flight, run.audit_id)
        elif decision.obligation is Obligation.PRESENT_REPORT:
            ctx.kind, ctx.status = "present_report", "complete"
            ctx.report_path = ws.report_md_path
    if ctx.audit_forecast is not None and ctx.run_id is not None and audit is not None:
        record_first(ws, audit.audit_id, ctx.audit_forecast)
    if ctx.kind in ("dispatch_review", "single_task_fallback") and ctx.run_id is not None and holding is None:
        # The prompts of the packets to launch first (dispatch wrote only the first waves', and a resumed run
        # has its outstanding packets first); plan_status writes the next ones as the host goes on.
        ahead = ctx.outstanding[: packet_render.prompts_ahead(ctx.waves)]
        packet_render.write_prompts(ws, ctx.run_id, [p["packet_id"] for p in ahead])
    if ctx.kind == "present_report" and not ws.report_md_path.is_file():
        reporting.write_report_files(ws, final=True)  # another host synthesized the shared audit: this copy
    return ctx


def _live(ws: Workspace, tx: Tx, ctx: StepContext, flight: InFlight, audit_id: int) -> None:
    """A run in flight is handed out as it stands now: what was learned since its dispatch (usage, reported
    failures) sets the width, the cooldown and the start times of the packets still outstanding."""
    assert ctx.plan is not None
    live = flight.live((), ws.clock())
    ctx.outstanding = [p for p in ctx.outstanding if p["packet_id"] in live.offsets]
    order = {pid: i for i, pid in enumerate(live.waiting)}
    ctx.outstanding.sort(key=lambda p: order[p["packet_id"]])
    ctx.outstanding = [{**p, "not_before_seconds": live.offsets[p["packet_id"]]} for p in ctx.outstanding]
    ctx.waves = live.waves
    planned = ctx.plan.get("schedule") or {}
    waiting = max(filter(None, (cooldown(ws, tx, audit_id), iso(live.schedule.cooldown_until))), default=None)
    view = schedule_view(live.schedule, planned.get("state_key") or flight.context.key)
    ctx.plan = {**ctx.plan, "cooldown_until": waiting, "wave_size": live.width, "schedule": {**planned, **view}}


def _wait(ws: Workspace, run_id: str, holding: claiming.Holding) -> tuple[str, str, float]:
    """A host with nothing to claim while other hosts still hold packets of the run waits for them."""
    held = ", ".join(f"{host}: {n}" for host, n in sorted(holding.others.items()))
    lapse = f"; the earliest claim lapses at {holding.earliest_lapse}" if holding.earliest_lapse else ""
    retry = 10.0
    reason = (
        f"every open packet of run {run_id} is held by another host ({held}){lapse}. This host has no packet to "
        f"review now. Wait {retry:g} seconds, then call next_step: it hands this host packets whose claims "
        "lapse, and merges the run and dispatches the next one once every packet is in"
    )
    return "wait", reason, retry


def write_step(ws: Workspace, ctx: StepContext) -> Step:
    """Render the Step and its prompt, and write both where hosts that read files find them."""
    step, prompt = render_step(ctx, ws.step_prompt_path)
    if ws.passed_over:
        notice = (
            f"{ws.passed_over}. This audit's state is in {ws.artifacts_dir} instead; nothing the checkout ships "
            "is trusted as audit state."
        )
        step = step.model_copy(update={"notices": [notice]})
        prompt = f"> **Tell the user:** {md_inline(notice)}\n\n{prompt}"
    write_atomic(ws.step_prompt_path, prompt)
    write_atomic(ws.step_json_path, step.model_dump_json(indent=2) + "\n")
    update_handoff(ws, step)  # written for a blocked step, removed for any other
    return step
