"""The next run (context, review or verification), planned by one function: dispatch opens it, and
status, quota and the Step forecast it.

Whatever the forecast says before dispatch (packets, waves, tokens, time) is what dispatch then does with
the same state: the same head of the queue, the same packer, prompt prefix and token budget, the same
scheduler with the same limits, learned state and host. A forecast names no packet: none exists yet.

A forecast needs only each packet's size (its tokens, tier, units and cells), and those hold while the queue's
generation stands: they are kept in process (``memo``) and recorded in the store (``store.forecasts``) under
that generation, the budget, the run's size and the config, so any process reads them instead of packing
again. Whoever packs records them: a forecast, and a dispatch for the run after its own (packed from what its
transaction leaves, under the generation its commit gives).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.models import HostCapabilities
from audit_mcp.engine import hosts
from audit_mcp.engine.dispatch import TIER_ORDER, PacketSpec
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.scheduling.limits import ResolvedLimits
from audit_mcp.scheduling.pacing import Pacing, forecast_view
from audit_mcp.scheduling.pacing import iso as iso_or_none
from audit_mcp.scheduling.scheduler import PacketLoad, Schedule, schedule
from audit_mcp.store.records import AuditRow, CellKind, CellState
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import memo
from audit_mcp.usecases.rates import cooldown, pacing
from audit_mcp.usecases.workspace import Workspace

if TYPE_CHECKING:
    from audit_mcp.engine.packets import PacketPlan
    from audit_mcp.usecases.packing import Packed


class Sized(NamedTuple):
    """What a forecast needs of one packet: its estimate, tier, units and cells."""

    tokens: int
    tier: str
    units: int
    cells: int


@dataclass(frozen=True)
class Sizes:
    """The next run's packets as a forecast sees them: their kind, and each one's size, in order."""

    kind: str
    packets: tuple[Sized, ...]

    @classmethod
    def of(cls, kind: str, plans: list[PacketPlan]) -> Sizes:
        return cls(
            kind,
            tuple(Sized(p.estimated_tokens, p.tier, len(p.units), sum(len(u.cells) for u in p.units)) for p in plans),
        )

    def encode(self) -> str:
        return json.dumps({"kind": self.kind, "packets": [list(p) for p in self.packets]}, separators=(",", ":"))

    @classmethod
    def decode(cls, body: str) -> Sizes:
        doc = json.loads(body)
        return cls(str(doc["kind"]), tuple(Sized(int(t), str(r), int(u), int(c)) for t, r, u, c in doc["packets"]))


@dataclass(frozen=True)
class NextRun:
    """The run the next dispatch opens: its packets, their schedule, and what it leaves for later runs.

    A forecast has the packets' sizes only; dispatch has them whole (``specs``, and ``packed`` with how to
    write each one's prompt) and the prompt prefix they share."""

    run_id: str
    seq: int
    single: bool
    sizes: Sizes
    planned: Schedule
    cooldown_until: str | None
    settings: Pacing
    limits: ResolvedLimits
    state_key: str
    budget: int
    pending_cells: int
    specs: list[PacketSpec] = field(default_factory=list)
    prefix: str = ""
    packed: Packed | None = None

    @property
    def waves(self) -> list[int]:
        return self.planned.waves

    @property
    def kind(self) -> str:
        return self.sizes.kind

    @property
    def cells_in_run(self) -> int:
        return sum(p.cells for p in self.sizes.packets)

    def forecast(self) -> dict[str, Any]:
        """What this run will take, as the dispatch plan's ``schedule.forecast`` and beyond; no packet ids."""
        return {
            **forecast_view(self.planned.forecast),
            "wave_size": self.planned.wave_size if self.sizes.packets else 0,
            "wave_sizes": self.waves,
            "estimated_tokens": sum(p.tokens for p in self.sizes.packets),
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
    ``reuse``: a forecast, which takes the packets' sizes kept or recorded for what it reads (the queue's
    generation, the audit, the budget, the run's size, the config) and packs only when there are none;
    dispatch always packs afresh, with the prompts to write.
    """
    limits, learned, key, settings = pacing(ws, config, caps, provider)
    budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
    limit = 1 if single else config.max_packets_per_run
    seq = len(tx.runs(audit.audit_id, plan=False)) + 1
    run_id = f"A{audit.audit_id}-R{seq}-{ws.run_tag}"
    specs: list[PacketSpec] = []
    packed: Packed | None = None
    prefix = ""
    if reuse:
        sizes = _sizes(ws, tx, audit, config, budget, limit)
    else:
        from audit_mcp.usecases.packing import pack_next

        packed, prefix = pack_next(ws, tx, audit, config, budget, limit)
        specs = _specs(ws, packed, run_id)
        sizes = Sizes.of(packed.kind, packed.plans)
    planned = schedule(
        limits,
        learned,
        caps.max_active_subagents,
        settings.wave_kind,
        [
            PacketLoad(f"{run_id}-P{n:02d}", p.tokens, TIER_ORDER[p.tier], p.units)
            for n, p in enumerate(sizes.packets, 1)
        ],
        ws.clock(),
        half_life=settings.half_life,
        max_packet_tokens=config.max_packet_tokens,
    )
    waiting = max(filter(None, (cooldown(ws, tx, audit.audit_id), iso_or_none(planned.cooldown_until))), default=None)
    return NextRun(
        run_id=run_id,
        seq=seq,
        single=single,
        sizes=sizes,
        planned=planned,
        cooldown_until=waiting,
        settings=settings,
        limits=limits,
        state_key=key,
        budget=budget,
        pending_cells=(memo.cell_counts(ws.memo, tx, audit.audit_id) if reuse else tx.cell_counts(audit.audit_id)).get(
            CellState.PENDING, 0
        ),
        specs=specs,
        prefix=prefix,
        packed=packed,
    )


def record_next(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, caps: HostCapabilities) -> None:
    """Record, last in a write transaction, the sizes a forecast for the host ``caps`` will find next: packed
    from what the transaction leaves, under the queue's generation its commit gives."""
    limits, learned, _, _ = pacing(ws, config, caps, None)
    budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
    limit = 1 if caps.can_dispatch_subagents is False else config.max_packets_per_run
    sizes = _packed(ws, tx, audit, config, budget, limit)
    if sizes.kind != CellKind.CONTEXT.value:
        key = packing_key(budget, limit, config)
        tx.record_forecast(audit.audit_id, key, tx.committed_queue_generation(), sizes.encode())


def packing_key(budget: int, limit: int, config: SessionConfig) -> str:
    """What a packing depends on besides the store: the budget, the run's size and the config."""
    return hashlib.sha256(f"{budget}\0{limit}\0{config.model_dump_json()}".encode()).hexdigest()


def _packed(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, budget: int, limit: int) -> Sizes:
    from audit_mcp.usecases.packing import pack_next  # a forecast read from the store needs no packer

    packed, _ = pack_next(ws, tx, audit, config, budget, limit)
    return Sizes.of(packed.kind, packed.plans)


def _sizes(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, budget: int, limit: int) -> Sizes:
    """The next run's sizes for a forecast: kept in process, else recorded in the store, else packed now (and
    recorded, unless another writer holds the store)."""
    generation = tx.queue_generation()
    key = packing_key(budget, limit, config)

    def recorded_or_packed() -> Sizes:
        body = tx.recorded_forecast(audit.audit_id, key, generation[1])
        if body is not None:
            return Sizes.decode(body)
        sizes = _packed(ws, tx, audit, config, budget, limit)
        if sizes.kind != CellKind.CONTEXT.value:
            ws.store.aside(lambda w: w.record_forecast(audit.audit_id, key, generation[1], sizes.encode()))
        return sizes

    return ws.memo.get(
        "next_run_sizes",
        (generation, audit.audit_id, key),
        recorded_or_packed,
        # The context packet's size comes from the repository's files as they are on disk, not the store.
        keep=lambda sizes: sizes.kind != CellKind.CONTEXT.value,
    )


def _specs(ws: Workspace, packed: Packed, run_id: str) -> list[PacketSpec]:
    """The next run's packets, named for run ``run_id``."""
    specs = []
    prompts = ws.packet_prompt_path(run_id, "-").parent  # one folder: no path built from parts per packet
    for n, packet_plan in enumerate(packed.plans, 1):
        packet_id = f"{run_id}-P{n:02d}"
        specs.append(PacketSpec(packet_id, packet_plan, prompts / f"{packet_id}.md", packed.kind))
    return specs


def forecast_for_remembered_host(ws: Workspace, config: SessionConfig) -> None:
    """Forecast the next run for the host the audit remembers, as ``status`` does, so that its sizes are kept in
    process and recorded in the store: the first ``status`` or ``quota`` after a merge then packs nothing. Called
    once a merge and what it taught are committed (the budget depends on the learned state)."""
    with ws.store.read() as tx:
        audit = tx.current_audit()
        if audit is None or audit.abandoned_at:
            return
        caps = remembered_caps(config, audit.host_caps)
        plan_next_run(ws, tx, audit, config, caps, single=caps.can_dispatch_subagents is False, reuse=True)


def remembered_caps(config: SessionConfig, remembered: dict[str, Any], model: str | None = None) -> HostCapabilities:
    """The host a view forecasts for: the one the audit remembers (``remembered``, its ``host_caps``), under
    the config's ``[host]``, with the reviewers' ``model`` when a view is asked for one."""
    return hosts.resolve(
        {"model": model},  # (a None is no argument)
        remembered,
        config.host,
        hosts.remembered_client(remembered),
        config.scheduler.wave_kind,
    )


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
