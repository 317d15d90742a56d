"""Dispatching a run: pack the head of the queue into packets, schedule their waves, write their prompts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.fs import DerivedWriter, write_atomic
from audit_mcp.core.models import HostCapabilities
from audit_mcp.engine.batching import head_of_queue
from audit_mcp.engine.dispatch import TIER_ORDER, PacketSpec, dispatch_plan
from audit_mcp.engine.graph import ImportGraph
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.packet_prompts import estimate_tokens, packet_prompt_prefix, render_packet_prompt
from audit_mcp.engine.packets import pack
from audit_mcp.findings.leads import leads_in
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.scheduling.leases import lease_end
from audit_mcp.scheduling.limits import balanced_waves
from audit_mcp.scheduling.pacing import iso as iso_or_none
from audit_mcp.scheduling.pacing import schedule_view
from audit_mcp.scheduling.scheduler import PacketLoad, schedule
from audit_mcp.store.records import CellState, PacketRow, RunRow
from audit_mcp.usecases.rates import cooldown, pacing
from audit_mcp.usecases.workspace import Workspace, iso


def run_tag(artifacts_dir: Path) -> str:
    """Six hex digits naming the artifacts directory, so run ids never repeat across roots (one server may
    serve several) and every call that names a run can be routed to the root that issued it."""
    return hashlib.sha256(str(artifacts_dir).encode("utf-8", "surrogateescape")).hexdigest()[:6]


def dispatch(ws: Workspace, config: SessionConfig, caps: HostCapabilities) -> None:
    """Open the next run: its packets, their leases and prompts, and the dispatch plan, in one transaction."""
    limits, learned, key, settings = pacing(ws, config, caps)
    budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
    prefix = packet_prompt_prefix(resolve_lenses(config))
    now = ws.now()
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        if any(r.state == "open" for r in tx.runs(audit.audit_id, plan=False)):
            return  # another caller opened a run while this one decided to: that run is the one to follow
        files = tx.files_in_order(audit.audit_id)  # only the files the head of the queue reaches are read
        judged = {v.lead_id for v in tx.verdicts(audit.audit_id)}
        open_leads = [x for x in tx.leads(audit.audit_id) if x.lead_id not in judged]
        single = not caps.can_dispatch_subagents
        prefix_tokens = estimate_tokens(prefix)
        queue = tx.iter_cells(audit.audit_id, CellState.PENDING)
        pending = head_of_queue(
            queue, files, packets=1 if single else config.max_packets_per_run, room=max(1, budget - prefix_tokens)
        )
        queue.close()
        # The edges with an end in the head: all that packing and the prompts' import context read,
        # indexed once for every packet's prompt.
        edges = ImportGraph(tx.edges_touching(audit.audit_id, {c.path for c in pending}))
        plans = pack(pending, files, edges, budget=budget, prefix_tokens=prefix_tokens)
        # A run stays small enough for the host to read its step; the rest waits for the next run.
        plans = plans[:1] if single else plans[: config.max_packets_per_run]
        seq = len(tx.runs(audit.audit_id, plan=False)) + 1
        run_id = f"A{audit.audit_id}-R{seq}-{run_tag(ws.artifacts_dir)}"
        specs = []
        for n, packet_plan in enumerate(plans, 1):
            packet_id = f"{run_id}-P{n:02d}"
            specs.append(PacketSpec(packet_id, packet_plan, ws.packet_prompt_path(run_id, packet_id)))
        planned = schedule(
            limits,
            learned,
            caps.max_active_subagents,
            settings.wave_kind,
            [PacketLoad(s.packet_id, s.plan.estimated_tokens, TIER_ORDER[s.plan.tier]) for s in specs],
            ws.clock(),
            half_life=settings.half_life,
            max_packet_tokens=config.max_packet_tokens,
        )
        waiting = max(
            filter(None, (cooldown(ws, tx, audit.audit_id), iso_or_none(planned.cooldown_until))), default=None
        )
        plan_doc = dispatch_plan(
            run_id=run_id,
            kind="single" if single else "dispatch",
            specs=specs,
            waves=balanced_waves(len(specs), planned.wave_size),
            cooldown_until=waiting,
            order=planned.order,
            schedule=schedule_view(planned, settings, key),
            launch_offsets=dict(zip(planned.order, planned.launch_offsets, strict=True)),
        )
        plan_doc["lease_expires_at"] = iso(lease_end(ws.clock(), config.lease_seconds))
        tx.insert_run(
            RunRow(
                run_id,
                audit.audit_id,
                seq,
                "single" if single else "dispatch",
                "open",
                now,
                None,
                plan_doc["wave_size"],
                plan_doc,
            )
        )
        # Prompts are written before the commit that makes their packets visible; a crash before it
        # leaves orphan files the next dispatch overwrites, so no temporary file or fsync per prompt.
        with DerivedWriter() as prompts:
            for n, spec in enumerate(specs, 1):
                carried = leads_in(open_leads, [(u.path, u.start_line, u.end_line) for u in spec.plan.units])
                asked = tx.open_requeues(audit.audit_id, [c.task_id for c in spec.plan.cells])
                prompts.write(
                    spec.prompt_path,
                    render_packet_prompt(
                        prefix=prefix,
                        run_id=run_id,
                        packet_id=spec.packet_id,
                        plan=spec.plan,
                        files=files,
                        edges=edges,
                        root=ws.root,
                        artifacts_dir=ws.artifacts_dir,
                        leads=carried,
                        requested=asked,
                    ),
                )
                tx.insert_packet(
                    audit.audit_id,
                    PacketRow(
                        spec.packet_id,
                        run_id,
                        n,
                        "issued",
                        spec.plan.estimated_tokens,
                        spec.plan.tier,
                        spec.plan.tier_reason,
                        str(spec.prompt_path),
                    ),
                    [c.task_id for c in spec.plan.cells],
                )
                tx.assign_leads(spec.packet_id, [x.lead_id for x in carried])
                tx.assign_cells(audit.audit_id, run_id, spec.packet_id, spec.plan.cells, now)
        tx.lease_packets(run_id, plan_doc["lease_expires_at"])
        # Indented for people when small; compact (and fast to write) on large repositories.
        indent = 2 if len(specs) <= 100 else None
        write_atomic(ws.plan_path(run_id), json.dumps(plan_doc, indent=indent) + "\n")
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor="engine",
            action="dispatch",
            detail=f"run {run_id}: {len(specs)} packet(s), waves {plan_doc['waves']}",
            outcome="ok",
        )
