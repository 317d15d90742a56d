"""Dispatching a run: plan it (``forecasting``, the same plan every forecast shows), then record its packets,
leases and prompts, and write its plan, one launch file per wave, and the folder results go into.

A run holds one kind of packet, in the order the obligations come: the context packet (the threat model)
before any review, review packets, then verification packets once review is done. All three go through
the same ``dispatch_review`` step, and each packet of the plan says its ``packet_kind``.
"""

from __future__ import annotations

import json

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.executable import audit_mcp_command
from audit_mcp.core.fs import DerivedWriter, write_atomic
from audit_mcp.core.models import HostCapabilities
from audit_mcp.engine.dispatch import dispatch_plan
from audit_mcp.engine.plan_pages import wave_doc
from audit_mcp.scheduling.leases import lease_end
from audit_mcp.scheduling.pacing import schedule_view
from audit_mcp.store.records import Cell, CellState, PacketRow, RunRow
from audit_mcp.store.runs import plan_json
from audit_mcp.usecases.audit_forecast import record_pending
from audit_mcp.usecases.forecasting import plan_next_run, record_next
from audit_mcp.usecases.inflight import context_for
from audit_mcp.usecases.packet_render import prompts_ahead
from audit_mcp.usecases.workspace import Workspace, iso


def dispatch(ws: Workspace, config: SessionConfig, caps: HostCapabilities) -> None:
    """Open the next run: its packets, their leases and prompts, and the dispatch plan, in one transaction."""
    now = ws.now()
    command = audit_mcp_command()
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        if any(r.state == "open" for r in tx.runs(audit.audit_id, plan=False)):
            return  # another caller opened a run while this one decided to: that run is the one to follow
        run = plan_next_run(ws, tx, audit, config, caps, single=not caps.can_dispatch_subagents)
        assert run.packed is not None  # planned to dispatch: packed whole
        for cell in run.packed.stale:
            tx.update_cell(
                audit.audit_id,
                cell.task_id,
                state=CellState.NOT_APPLICABLE,
                now=now,
                reason="the finding it was to verify is no longer reported (its file changed and was reviewed again)",
            )
        if not run.specs:
            return  # every pending verify cell was stale: settled above, and the planner moves on
        run_id, specs, planned = run.run_id, run.specs, run.planned
        kind = "single" if run.single else "dispatch"
        plan_doc = dispatch_plan(
            run_id=run_id,
            kind=kind,
            specs=specs,
            waves=run.waves,
            cooldown_until=run.cooldown_until,
            order=planned.order,
            schedule=schedule_view(planned, run.state_key),
            launch_offsets=dict(zip(planned.order, planned.launch_offsets, strict=True)),
        )
        plan_doc["lease_expires_at"] = iso(lease_end(ws.clock(), config.lease_seconds))
        # Serialized once: the store keeps this text, and the plan file of a large run is the same bytes.
        plan_text = plan_json(plan_doc)
        tx.insert_run(
            RunRow(run_id, audit.audit_id, run.seq, kind, "open", now, None, plan_doc["wave_size"], plan_doc), plan_text
        )
        # The folder the packet prompts' shell fallback writes results into.
        ws.results_dir(run_id).mkdir(parents=True, exist_ok=True)
        # Prompts are written before the commit that makes their packets visible; a crash before it
        # leaves orphan files the next dispatch overwrites, so no temporary file or fsync per prompt. Only
        # the first waves' prompts are written now: the host's calls between launches write the next ones.
        first = {p["packet_id"] for p in plan_doc["packets"][: prompts_ahead(plan_doc["waves"])]}
        packets: list[tuple[PacketRow, list[str]]] = []
        leads: dict[str, list[str]] = {}
        cells: dict[str, list[Cell]] = {}
        with DerivedWriter() as prompts:
            for n, (spec, render, carry) in enumerate(
                zip(specs, run.packed.renders, run.packed.carries, strict=True), 1
            ):
                if spec.packet_id in first:
                    text, carried = render(run_id, spec.packet_id, ws.results_path(run_id, spec.packet_id), command)
                    prompts.write(spec.prompt_path, text)
                else:
                    carried = carry()
                row = PacketRow(
                    spec.packet_id,
                    run_id,
                    n,
                    "issued",
                    spec.plan.estimated_tokens,
                    spec.plan.tier,
                    spec.plan.tier_reason,
                    str(spec.prompt_path),
                    spec.kind,
                )
                mine = cells[spec.packet_id] = spec.plan.cells
                packets.append((row, [c.task_id for c in mine]))
                leads[spec.packet_id] = [x.lead_id for x in carried]
            # The whole run in three statements (a shared store answers each over the network).
            tx.insert_packets(audit.audit_id, packets)
            tx.assign_run_leads(leads)
            tx.assign_run_cells(audit.audit_id, run_id, cells, now)
            for wave in range(1, len(plan_doc["waves"]) + 1):
                prompts.write(ws.wave_path(run_id, wave), json.dumps(wave_doc(plan_doc, wave), indent=2) + "\n")
        for spec in specs:
            if spec.packet_id in first:
                ws.note_written(spec.prompt_path)
        if ws.store.dialect != "postgresql":  # a shared store leases each packet when a host claims it
            tx.lease_packets(run_id, plan_doc["lease_expires_at"])
        units = {s.packet_id: len(s.plan.units) for s in specs}
        tx.put_run_context(
            run_id,
            {
                **context_for(run.state_key, run.limits, caps, run.settings, config).as_dict(),
                "units": units,
                "budget": run.budget,
                # The block every prompt of the run starts with, written once: later prompts are rendered
                # from it, so a prompt written mid-run reads as it would have at dispatch.
                "prompt_prefix": run.prefix,
            },
        )
        # Indented for people when small; on large repositories the compact text the store keeps.
        write_atomic(ws.plan_path(run_id), (json.dumps(plan_doc, indent=2) if len(specs) <= 100 else plan_text) + "\n")
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor="engine",
            action="dispatch",
            detail=f"run {run_id}: {len(specs)} {run.kind} packet(s), waves {plan_doc['waves']}",
            outcome="ok",
            data={"run_id": run_id, "packet_kind": run.kind, "packets": len(specs), "provider": run.limits.provider},
        )
        # Last: the next run as the queue stands once this commits, so the first forecast after it packs nothing,
        # and what a forecast of the whole audit takes from the packer.
        record_next(ws, tx, audit, config, caps)
        record_pending(ws, tx, audit, config, caps)
