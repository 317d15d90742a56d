"""plan_status: a light read between waves of what to do with the packets not launched yet.

A host calls it between waves (a rolling host: whenever a subagent finishes), passing the failures it has
seen so far and the packets it has launched. New failures are recorded for the merge and learned at once,
as every accepted submission's usage already is; the answer is the run's schedule now: the width, the
cooldown, and each waiting packet's earliest start (seconds after the run's first start, as in the plan).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from audit_mcp.core.errors import ConfigError, NotFoundError
from audit_mcp.core.models import PlanStatus, WaitingPacket
from audit_mcp.core.text import id_problem
from audit_mcp.scheduling.limits import waves_for
from audit_mcp.scheduling.pacing import forecast_view, iso
from audit_mcp.usecases import packet_render
from audit_mcp.usecases.inflight import checked_failures, in_flight, learn_from_failures
from audit_mcp.usecases.rates import cooldown
from audit_mcp.usecases.workspace import Workspace

MAX_LAUNCHED = 2_000


def plan_status(
    ws: Workspace,
    run_id: str,
    failures: Sequence[Mapping[str, Any]] | None = None,
    launched: Sequence[str] | None = None,
) -> PlanStatus:
    """Record and learn the newly reported failures, then the run's schedule for its waiting packets."""
    if problem := id_problem("run_id", run_id):
        raise ConfigError(problem)
    reported = checked_failures(failures)
    started = list(launched or [])
    if len(started) > MAX_LAUNCHED or not all(isinstance(p, str) for p in started):
        raise ConfigError(f"launched must be a list of at most {MAX_LAUNCHED} packet ids")
    config = ws.config()
    with ws.store.write() as tx:
        run = tx.run(run_id, plan=False)
        if run is None:
            raise NotFoundError(f"run {run_id!r} is unknown; take run_id from the current step")
        if run.state != "open":
            raise ConfigError(f"run {run_id} is already merged; call next_step for what to do now")
        ids = {p.packet_id for p in tx.packets(run_id)}
        unknown = sorted((set(reported) | set(started)) - ids)
        if unknown:
            raise ConfigError(f"packet(s) {unknown} are not in run {run_id}; take packet ids from its plan")
        # What this records is what packets answered (their failures) and the log: the queue, the manifest and
        # the runs stay as they are, so the forecasts recorded for the next run hold.
        tx.records_answer_only()
        before = tx.reported_failures(run_id)
        new = {p: t for p, t in reported.items() if p not in before and tx.report_failure(p, run_id, t, ws.now())}
        flight = in_flight(ws, config, tx, run_id)
        audit_cooldown = cooldown(ws, tx, run.audit_id)
        if new:
            tx.log(
                now=ws.now(),
                audit_id=run.audit_id,
                actor="host",
                action="report_failures",
                detail=f"run {run_id}: {len(new)} packet(s) reported failed before the merge",
                outcome="recorded",
            )
    if flight is None:
        return _as_planned(ws, run_id, started, len(new), audit_cooldown)
    learn_from_failures(ws, flight, list(new.values()))
    with ws.store.read() as tx:
        flight = in_flight(ws, config, tx, run_id) or flight  # with what was just learned
    now = ws.clock()
    live = flight.live(started, now)
    until = max(filter(None, (audit_cooldown, iso(live.schedule.cooldown_until))), default=None)
    running = len(set(started) - flight.submitted - set(flight.reported))
    # The packets the host launches next get their prompt files now (dispatch wrote the first waves' only).
    packet_render.write_prompts(ws, run_id, live.waiting[: packet_render.prompts_ahead(live.waves)])
    return PlanStatus(
        run_id=run_id,
        dispatch_mode=flight.context.mode,  # type: ignore[arg-type]
        width=live.width,
        planned_width=run.wave_size,
        waves=live.waves,
        cooldown_until=until,
        waiting=[WaitingPacket(packet_id=p, not_before_seconds=live.offsets[p]) for p in live.waiting],
        held=live.held,
        submitted=len(flight.submitted),
        failed=len(flight.reported),
        running=running,
        failures_recorded=len(new),
        reasoning=live.schedule.reasoning,
        forecast=forecast_view(live.schedule.forecast),
        next_action=_next_action(run_id, flight.context.mode, live.width, live.waves, until, running, live.waiting)
        + _held(live.held),
    )


def _as_planned(ws: Workspace, run_id: str, started: list[str], recorded: int, until: str | None) -> PlanStatus:
    """A run dispatched before runs recorded what they were scheduled for: its plan as written."""
    with ws.store.read() as tx:
        run = tx.run(run_id)
        assert run is not None
        submitted, reported = tx.submitted_packet_ids(run_id), tx.reported_failures(run_id)
    plan, planned = run.plan, run.plan.get("schedule") or {}
    done = submitted | set(reported) | set(started)
    waiting = [p for p in plan["packets"] if p["packet_id"] not in done]
    mode: Literal["rolling", "whole_wave"] = (
        "whole_wave" if (planned.get("dispatch_mode") or planned.get("wave_kind")) == "whole_wave" else "rolling"
    )
    until = max(filter(None, (until, plan.get("cooldown_until"))), default=None)
    running = len(set(started) - submitted - set(reported))
    waves = waves_for(len(waiting), run.wave_size, mode)
    packet_render.write_prompts(ws, run_id, [p["packet_id"] for p in waiting[: packet_render.prompts_ahead(waves)]])
    return PlanStatus(
        run_id=run_id,
        dispatch_mode=mode,
        width=run.wave_size,
        planned_width=run.wave_size,
        waves=waves_for(len(waiting), run.wave_size, mode),
        cooldown_until=until,
        waiting=[
            WaitingPacket(packet_id=p["packet_id"], not_before_seconds=float(p.get("not_before_seconds") or 0.0))
            for p in waiting
        ],
        submitted=len(submitted),
        failed=len(reported),
        running=running,
        failures_recorded=recorded,
        reasoning=str(planned.get("reasoning") or ""),
        forecast=dict(planned.get("forecast") or {}),
        next_action=_next_action(
            run_id,
            mode,
            run.wave_size,
            waves_for(len(waiting), run.wave_size, mode),
            until,
            running,
            [p["packet_id"] for p in waiting],
        ),
    )


def _held(held: list[str]) -> str:
    if not held:
        return ""
    return (
        f" Do not launch {', '.join(held[:10])}{' …' if len(held) > 10 else ''} ({len(held)} packet(s)): the model's "
        "input limit, now known, cannot admit their first call; merge_and_ingest hands their work out again, "
        "packed smaller, without counting it as a failed attempt."
    )


def _next_action(
    run_id: str, mode: str, width: int, waves: list[int], until: str | None, running: int, waiting: list[str]
) -> str:
    hold = f"Launch nothing before {until} (UTC). " if until else ""
    if not waiting:
        return (
            f"Every packet of run {run_id} is launched or done: wait for the {running} running subagent(s), then "
            "call merge_and_ingest with the failures you saw."
        )
    if mode == "whole_wave":
        return (
            f"{hold}When the current wave has finished, launch the next {waves[0]} waiting packet(s) together, "
            "in the order listed, not before their not_before_seconds after the run's first start; call "
            "plan_status again before the wave after it."
        )
    free = max(0, width - running)
    return (
        f"{hold}Keep {width} subagent(s) running ({free} slot(s) free now): start the next waiting packet, in "
        "the order listed, as soon as a slot frees, not before its not_before_seconds after the run's first "
        "start; call plan_status again each time a subagent finishes, with the failures seen since."
    )
