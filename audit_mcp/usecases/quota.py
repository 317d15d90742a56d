"""quota_status: the model's limits, what was learned from rate limits, and the schedule it would give now."""

from __future__ import annotations

from audit_mcp.core.models import LimitView, QuotaStatus
from audit_mcp.engine import hosts
from audit_mcp.engine.batching import head_of_queue
from audit_mcp.engine.dispatch import TIER_ORDER
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.packet_prompts import estimate_tokens, packet_prompt_prefix
from audit_mcp.engine.packets import PacketPlan, pack
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.scheduling.limits import ResolvedLimits
from audit_mcp.scheduling.pacing import iso, schedule_view
from audit_mcp.scheduling.probe import probe
from audit_mcp.scheduling.scheduler import PacketLoad, schedule
from audit_mcp.store.records import CellState, PacketRow
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import rates
from audit_mcp.usecases.workspace import Workspace


def quota_view(ws: Workspace, host_model: str | None, provider: str | None) -> QuotaStatus:
    """Resolved limits, learned caps, and the schedule the server would give now for the open work."""
    config = ws.config()
    with ws.store.read() as tx:
        audit = tx.current_audit()
        remembered = audit.host_caps if audit else {}
        caps = hosts.resolve({"model": host_model}, remembered, config.host, None)
        failures = tx.failures(audit.audit_id) if audit else []
        cooldown = rates.cooldown(ws, tx, audit.audit_id) if audit else None
        # The audit's remaining work, counted in SQL: the packets out in the open run (as they were packed)
        # and the head of the pending queue the next run takes, packed as dispatching packs it.
        counts = tx.cell_counts(audit.audit_id) if audit else {}
        out = _outstanding(tx, audit.audit_id) if audit else []
    open_cells = counts.get(CellState.PENDING, 0) + counts.get(CellState.ASSIGNED, 0)
    limits, learned, key, pacing = rates.pacing(ws, config, caps, provider)
    now = ws.clock()
    probed = probe(limits.provider, limits.model, pacing.probe, now, transport=ws.probe_transport)
    if probed.limits:
        limits = ResolvedLimits(limits.provider, limits.model, {**limits.limits, **probed.limits})
    budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
    plans: list[PacketPlan] = []
    if audit is not None and counts.get(CellState.PENDING, 0):
        prefix_tokens = estimate_tokens(packet_prompt_prefix(resolve_lenses(config)))
        with ws.store.read() as tx:
            plans = _next_run(tx, audit.audit_id, budget, prefix_tokens, config.max_packets_per_run)
    loads = [PacketLoad(p.packet_id, p.estimated_tokens, TIER_ORDER[p.model_tier]) for p in out]
    loads += [PacketLoad(f"P{n:02d}", p.estimated_tokens, TIER_ORDER[p.tier]) for n, p in enumerate(plans, 1)]
    planned = schedule(
        limits,
        learned,
        caps.max_active_subagents,
        pacing.wave_kind,
        loads,
        now,
        half_life=pacing.half_life,
        max_packet_tokens=config.max_packet_tokens,
    )
    cooldown = max(filter(None, (cooldown, iso(planned.cooldown_until))), default=None)
    last_429 = iso(learned.last_429_at) or next(
        (f["at"] for f in reversed(failures) if f["kind"] == "rate_limited"), None
    )
    notes = []
    if all(v.confidence == "low" for v in limits.limits.values()):
        notes.append(
            "Every limit is a built-in default (low confidence): set [model] in the session config or "
            "the AUDIT_MCP_* environment variables to make them medium."
        )
    if probed.note:
        notes.append(probed.note)
    if learned.hard_stop:
        notes.append(f"Last hard stop: {learned.hard_stop}")
    notes += ws.learned.notes(key)
    view = schedule_view(planned, pacing, key)
    return QuotaStatus(
        provider=limits.provider,
        model=limits.model,
        limits={
            k: LimitView(value=v.value, source=v.source, confidence=v.confidence)  # type: ignore[arg-type]
            for k, v in limits.limits.items()
        },
        packet_budget_tokens=budget,
        learned={
            "max_safe_concurrency": planned.learned_cap or planned.physical_cap,
            "learned_cap": planned.learned_cap,
            "physical_cap": planned.physical_cap,
            "cooldown_until": cooldown,
            "last_429_at": last_429,
            "last_decrease_at": iso(learned.last_decrease_at),
            "hard_stop": learned.hard_stop,
            "clean_runs": learned.clean_runs,
            "rate_limited_runs": learned.rate_limited_runs,
            "half_life_hours": pacing.half_life.total_seconds() / 3600,
            "rate_limited_failures": sum(1 for f in failures if f["kind"] == "rate_limited"),
        },
        learned_state_path=str(ws.learned.path),
        host_max_active_subagents=caps.max_active_subagents,
        schedule={
            "pending_cells": counts.get(CellState.PENDING, 0),
            "open_cells": open_cells,
            "packets": len(loads),
            "waves": planned.waves,
            "wave_size": planned.wave_size,
            "cooldown_until": cooldown,
            "estimated_tokens": sum(load.estimated_tokens for load in loads),
            "estimated_wave_tokens": planned.estimated_wave_tokens,
            "launch_order": planned.order[:50],
            **{k: v for k, v in view.items() if k != "forecast"},
        },
        forecast=view["forecast"],
        notes=notes,
    )


def _outstanding(tx: Tx, audit_id: int) -> list[PacketRow]:
    """The packets of the open run not submitted yet."""
    run = next((r for r in tx.runs(audit_id, plan=False) if r.state == "open"), None)
    if run is None:
        return []
    submitted = tx.submitted_packet_ids(run.run_id)
    return [p for p in tx.packets(run.run_id) if p.packet_id not in submitted]


def _next_run(tx: Tx, audit_id: int, budget: int, prefix_tokens: int, max_packets: int) -> list[PacketPlan]:
    """The packets of the next run: the head of the pending queue, packed as dispatching packs it, never
    the whole matrix."""
    files = tx.files_in_order(audit_id)
    queue = tx.iter_cells(audit_id, CellState.PENDING)
    try:
        head = head_of_queue(queue, files, packets=max_packets, room=max(1, budget - prefix_tokens))
    finally:
        queue.close()
    # Edges with an end outside the head change nothing in its packing.
    edges = tx.edges_between(audit_id, {c.path for c in head})
    return pack(head, files, edges, budget=budget, prefix_tokens=prefix_tokens)[:max_packets]
