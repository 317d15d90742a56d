"""The next run (context, review or verification), planned by one function: dispatch opens it, and
status, quota and the Step forecast it.

Whatever the forecast says before dispatch (packets, waves, tokens, time) is what dispatch then does with
the same state: the same head of the queue, the same packer, prompt prefix and token budget, the same
scheduler with the same limits, learned state and host. A forecast names no packet: none exists yet.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.models import HostCapabilities
from audit_mcp.engine.dispatch import TIER_ORDER, PacketSpec
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.scheduling.limits import ResolvedLimits
from audit_mcp.scheduling.pacing import Pacing, forecast_view
from audit_mcp.scheduling.pacing import iso as iso_or_none
from audit_mcp.scheduling.scheduler import PacketLoad, Schedule, schedule
from audit_mcp.store.records import AuditRow, CellKind, CellState
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import memo
from audit_mcp.usecases.packing import Packed, pack_next
from audit_mcp.usecases.rates import cooldown, pacing
from audit_mcp.usecases.workspace import Workspace


def run_tag(artifacts_dir: Path) -> str:
    """Six hex digits naming the artifacts directory, so run ids never repeat across roots (one server may
    serve several) and every call that names a run can be routed to the root that issued it."""
    return hashlib.sha256(str(artifacts_dir).encode("utf-8", "surrogateescape")).hexdigest()[:6]


@dataclass(frozen=True)
class NextRun:
    """The run the next dispatch opens: its packets, their schedule, and what it leaves for later runs."""

    run_id: str
    seq: int
    single: bool
    specs: list[PacketSpec]
    planned: Schedule
    cooldown_until: str | None
    settings: Pacing
    limits: ResolvedLimits
    state_key: str
    prefix: str
    packed: Packed  # the packets' kind, and how to write each one's prompt
    budget: int
    pending_cells: int
    cells_in_run: int

    @property
    def waves(self) -> list[int]:
        return self.planned.waves

    @property
    def kind(self) -> str:
        return self.packed.kind

    def forecast(self) -> dict[str, Any]:
        """What this run will take, as the dispatch plan's ``schedule.forecast`` and beyond; no packet ids."""
        return {
            **forecast_view(self.planned.forecast),
            "wave_size": self.planned.wave_size if self.specs else 0,
            "wave_sizes": self.waves,
            "estimated_tokens": sum(s.plan.estimated_tokens for s in self.specs),
            "packet_budget_tokens": self.budget,
            "cooldown_until": self.cooldown_until,
            "cells": self.cells_in_run,
            "pending_cells": self.pending_cells,
            "cells_for_later_runs": self.pending_cells - self.cells_in_run,
            "single_packet": self.single,
            "packet_kind": self.kind,
        }


def plan_next_run(
    ws: Workspace,
    tx: Tx,
    audit: AuditRow,
    config: SessionConfig,
    caps: HostCapabilities,
    *,
    single: bool,
    provider: str | None = None,
    reuse: bool = False,
) -> NextRun:
    """The next run for the audit's pending cells, planned inside the caller's transaction (read or write).

    ``provider`` overrides the one the model implies, for ``quota_status(provider=...)``; dispatch never does.
    ``reuse``: a forecast takes the packing of the last forecast when nothing it reads has changed since (the
    queue's generation, the audit, the budget, the run's size, the config); dispatch always packs afresh, with
    the prompts to write.
    """
    limits, learned, key, settings = pacing(ws, config, caps, provider)
    budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
    limit = 1 if single else config.max_packets_per_run
    seq = len(tx.runs(audit.audit_id, plan=False)) + 1
    run_id = f"A{audit.audit_id}-R{seq}-{run_tag(ws.artifacts_dir)}"
    if reuse:
        packed, prefix, specs = ws.memo.get(
            "next_run_packing",
            (tx.queue_generation(), audit.audit_id, run_id, budget, limit, config.model_dump_json()),
            lambda: _for_forecast(*_packing(ws, tx, audit, config, budget, limit, run_id)),
            # The context packet's size comes from the repository's files as they are on disk, not the store.
            keep=lambda packing: packing[0].kind != CellKind.CONTEXT.value,
        )
    else:
        packed, prefix, specs = _packing(ws, tx, audit, config, budget, limit, run_id)
    planned = schedule(
        limits,
        learned,
        caps.max_active_subagents,
        settings.wave_kind,
        [PacketLoad(s.packet_id, s.plan.estimated_tokens, TIER_ORDER[s.plan.tier], len(s.plan.units)) for s in specs],
        ws.clock(),
        half_life=settings.half_life,
        max_packet_tokens=config.max_packet_tokens,
    )
    waiting = max(filter(None, (cooldown(ws, tx, audit.audit_id), iso_or_none(planned.cooldown_until))), default=None)
    return NextRun(
        run_id=run_id,
        seq=seq,
        single=single,
        specs=specs,
        planned=planned,
        cooldown_until=waiting,
        settings=settings,
        limits=limits,
        state_key=key,
        prefix=prefix,
        packed=packed,
        budget=budget,
        pending_cells=(memo.cell_counts(ws.memo, tx, audit.audit_id) if reuse else tx.cell_counts(audit.audit_id)).get(
            CellState.PENDING, 0
        ),
        cells_in_run=sum(len(u.cells) for s in specs for u in s.plan.units),
    )


def _packing(
    ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, budget: int, limit: int, run_id: str
) -> tuple[Packed, str, list[PacketSpec]]:
    """The next run's packets (``pack_next``), named for run ``run_id``."""
    packed, prefix = pack_next(ws, tx, audit, config, budget, limit)
    specs = []
    prompts = ws.packet_prompt_path(run_id, "-").parent  # one folder: no path built from parts per packet
    for n, packet_plan in enumerate(packed.plans, 1):
        packet_id = f"{run_id}-P{n:02d}"
        specs.append(PacketSpec(packet_id, packet_plan, prompts / f"{packet_id}.md", packed.kind))
    return packed, prefix, specs


def _for_forecast(packed: Packed, prefix: str, specs: list[PacketSpec]) -> tuple[Packed, str, list[PacketSpec]]:
    """What a forecast keeps of a packing: the packets' plans, without the reads their prompts would need."""
    return Packed(packed.kind, list(packed.plans)), prefix, specs


def forecast(ws: Workspace, config: SessionConfig, caps: HostCapabilities) -> dict[str, Any] | None:
    """The forecast of the next run for the current audit, or None before an audit exists.

    A host whose ability to dispatch is not known yet is forecast as one that can (the common case).
    """
    with ws.store.read() as tx:
        audit = tx.current_audit()
        if audit is None:
            return None
        single = caps.can_dispatch_subagents is False
        return plan_next_run(ws, tx, audit, config, caps, single=single, reuse=True).forecast()
