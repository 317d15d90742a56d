"""quota_status: the model's limits, what was learned from rate limits, and the schedule it would give now.

The forecast is the next run exactly as dispatch will plan it (``forecasting``), for the host that last called
next_step; it names no packet, since none exists before its run. The schedule counts the work left: while a
run is open, its packets still out (as they were packed, in ``launch_order``), then the next run's.
"""

from __future__ import annotations

from typing import Any

from audit_mcp.core.models import LimitView, QuotaStatus
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.scheduling.claims import held_claims
from audit_mcp.scheduling.limits import ResolvedLimits
from audit_mcp.scheduling.pacing import iso, schedule_view
from audit_mcp.scheduling.probe import probe
from audit_mcp.scheduling.scheduler import schedule
from audit_mcp.store.records import CellKind, CellState
from audit_mcp.usecases import memo, rates
from audit_mcp.usecases.audit_forecast import before_any, for_audit
from audit_mcp.usecases.forecasting import NextRun, plan_next_run, remembered_caps
from audit_mcp.usecases.probing import ProbeOutcome, probe_before_run, probe_block
from audit_mcp.usecases.workspace import Workspace

# Fields of the scheduler's view that key packets by id: a forecast has no packets to name.
_BY_PACKET = ("launch_offsets", "oversize_packets")


def quota_view(
    ws: Workspace, host_model: str | None, provider: str | None, quota_probe: str | None = None
) -> QuotaStatus:
    """Resolved limits, learned caps, the schedule the server would give now for the open work, and the
    forecast of the whole audit (of one started now, where none is under way).

    ``quota_probe`` (``auto``, ``never``, ``force``: ``--quota-probe``) asks the provider first, as ``run``
    does, and what its rate-limit headers state is learned; without it the config's ``[scheduler] probe``
    asks, and what it reads is shown beside the limits but not learned.
    """
    config = ws.config()
    asked = probe_before_run(ws, host_model, quota_probe, provider) if quota_probe is not None else None
    run: NextRun | None = None
    failures: list[dict[str, Any]] = []
    open_order: list[str] = []
    outstanding_tokens = outstanding_packets = 0
    remembered: dict[str, Any] = {}
    whole: dict[str, Any] | None = None
    assigned = 0
    by_kind: dict[str, dict[str, int]] = {}
    with ws.store_if_any() as tx:
        audit = tx.current_audit() if tx is not None else None
        if tx is not None and audit is not None:
            remembered = audit.host_caps
        caps = remembered_caps(config, remembered, host_model)
        if tx is not None and audit is not None:
            failures = tx.failures(audit.audit_id)
            run = plan_next_run(
                ws, tx, audit, config, caps, single=caps.can_dispatch_subagents is False, provider=provider, reuse=True
            )
            whole = for_audit(ws, tx, audit, config, caps, next_run=run, provider=provider)
            assigned = memo.cell_counts(ws.memo, tx, audit.audit_id).get(CellState.ASSIGNED, 0)
            # The context and verify cells among them, by kind: the obligations the forecast names.
            by_kind = memo.cell_counts_by_kind(ws.memo, tx, audit.audit_id)
            # Only the open run's plan is read: earlier runs' plans can be megabytes each.
            open_id = next((r.run_id for r in tx.runs(audit.audit_id, plan=False) if r.state == "open"), None)
            if open_id is not None:
                submitted = set(tx.submitted_packet_ids(open_id))
                order = ws.memo.get("launch_order", (tx.queue_generation(), open_id), lambda: tx.launch_order(open_id))
                open_order = [p for p in order if p not in submitted]
                out = [p for p in tx.packets(open_id) if p.packet_id not in submitted]
                outstanding_tokens, outstanding_packets = sum(p.estimated_tokens for p in out), len(out)
    limits, learned, key, pacing = rates.pacing(ws, config, caps, provider)
    now = ws.clock()
    if run is not None:
        planned, budget = run.planned, run.budget
    else:
        budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
        planned = schedule(
            limits,
            learned,
            caps.max_active_subagents,
            pacing.wave_kind,
            [],
            now,
            half_life=pacing.half_life,
            max_packet_tokens=config.max_packet_tokens,
        )
    notes = []
    if all(v.confidence == "low" for v in limits.limits.values()):
        notes.append(
            "Every limit is a built-in default (low confidence): set [model] in the session config or "
            "the AUDIT_MCP_* environment variables to make them medium."
        )
    if asked is None:
        probed = probe(limits.provider, limits.model, pacing.probe, now, transport=ws.probe_transport)
        asked = ProbeOutcome(pacing.probe, probed.note, read={k: v.value for k, v in probed.limits.items()})
        if probed.limits:
            limits = ResolvedLimits(limits.provider, limits.model, {**limits.limits, **probed.limits})
            notes.append(
                "The limits marked as probed were read from the provider now; the schedule and forecast are what "
                "dispatch will plan, with the configured, learned or built-in limits. Set the probed values under "
                "[model] in the session config to plan with them, or ask with --quota-probe to learn them."
            )
    if asked.note:
        notes.append(asked.note)
    if learned.hard_stop:
        notes.append(f"Last hard stop: {learned.hard_stop}")
    notes += ws.learned.notes(key)
    notes += [f"Not obeyed: {claim}." for claim in held_claims(learned, now, pacing.half_life)]
    view = schedule_view(planned, key)
    cooldown = run.cooldown_until if run is not None else iso(planned.cooldown_until)
    forecast = run.forecast() if run is not None else {**view["forecast"], "cells": 0, "pending_cells": 0}
    if whole is None:
        whole = before_any(ws, config, caps, provider=provider)
        forecast["time_range"] = "no run is planned: no audit has started (forecast.audit is what one would do)"
        notes.append(
            "No audit has started here: forecast.audit is what one started now would do, read from the "
            "repository as intake reads it; nothing was written. Start it with `audit-mcp next-step` (or `run`)."
        )
    forecast["audit"] = whole
    return QuotaStatus(
        provider=limits.provider,
        model=limits.model,
        limits={
            k: LimitView(value=v.value, source=v.source, confidence=v.confidence)  # type: ignore[arg-type]
            for k, v in limits.limits.items()
        },
        packet_budget_tokens=budget,
        learned={
            "max_safe_concurrency": planned.learned_cap
            or (planned.wave_size if planned.slow_start else planned.physical_cap),
            "slow_start": planned.slow_start,
            "learned_cap": planned.learned_cap,
            "physical_cap": planned.physical_cap,
            "cooldown_until": cooldown,
            "last_429_at": iso(learned.last_429_at)
            or next((f["at"] for f in reversed(failures) if f["kind"] == "rate_limited"), None),
            "last_decrease_at": iso(learned.last_decrease_at),
            "hard_stop": learned.hard_stop,
            "clean_runs": learned.clean_runs,
            "rate_limited_runs": learned.rate_limited_runs,
            "half_life_hours": pacing.half_life.total_seconds() / 3600,
            "rate_limited_failures": sum(1 for f in failures if f["kind"] == "rate_limited"),
        },
        learned_state_path=ws.learned.location,
        host_max_active_subagents=caps.max_active_subagents,
        schedule={
            "pending_cells": run.pending_cells if run is not None else 0,
            "open_cells": (run.pending_cells if run is not None else 0) + assigned,
            "packets": outstanding_packets + (len(run.sizes.packets) if run is not None else 0),
            "obligations": open_obligations(by_kind),
            "waves": run.waves if run is not None else [],
            # With nothing to pack, the widest wave the limits, the learned cap and the host allow now.
            "wave_size": planned.wave_size or min(planned.learned_cap or planned.physical_cap, planned.physical_cap),
            "cooldown_until": cooldown,
            "estimated_tokens": outstanding_tokens + forecast.get("estimated_tokens", 0),
            "estimated_wave_tokens": planned.estimated_wave_tokens,
            # Real packets only: the open run's, still out, in its launch order (the next run's have no ids yet).
            "launch_order": open_order[:50],
            "oversize_packet_count": len(planned.oversize),
            **{k: v for k, v in view.items() if k != "forecast" and k not in _BY_PACKET},
        },
        forecast=forecast,
        notes=notes,
        probe=probe_block(asked, limits.provider, limits.model),
    )


def open_obligations(by_kind: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Open cells of each kind, and the packets they take: one context packet, verifiers by the packet's cap."""
    out = {}
    for kind in CellKind:
        counts = by_kind.get(kind, {})
        pending, assigned = counts.get(CellState.PENDING, 0), counts.get(CellState.ASSIGNED, 0)
        out[kind.value] = {"pending": pending, "assigned": assigned, "done": sum(counts.values()) - pending - assigned}
        if kind is CellKind.CONTEXT:
            out[kind.value]["packets"] = 1 if pending else 0
        elif kind is CellKind.VERIFY:
            out[kind.value]["packets"] = _verifier_packets(pending)
    return out


def _verifier_packets(pending: int) -> int:
    if not pending:
        return 0
    # Loaded only with verifications to count: the verifiers' packer builds on the review packer.
    from audit_mcp.engine.opinion_packets import MAX_VERIFY_TASKS

    return -(-pending // MAX_VERIFY_TASKS)
