"""A packet's prompt rendered from the store, for this host's checkout and artifacts directory.

In a shared store the host that dispatched a run is not the one that reviews most of it: every host
renders the prompts of the packets it claims from the store, with its own root and paths, so no host
depends on a file another host wrote. The MCP resources of a packet prompt and of a dispatch plan fall
back to the store the same way, so a host that did not write those files still serves them.
"""

from __future__ import annotations

import json
from collections import defaultdict

from audit_mcp.core.errors import NotFoundError
from audit_mcp.core.executable import audit_mcp_command
from audit_mcp.core.fs import write_atomic
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.opinion_prompts import render_context_prompt, render_verify_prompt, verify_prefix
from audit_mcp.engine.packet_prompts import packet_prompt_prefix, render_packet_prompt
from audit_mcp.engine.packets import PacketPlan, Unit, unit_tokens
from audit_mcp.store.records import Cell, CellKind
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.context import overview_for, threat_model_text
from audit_mcp.usecases.verifying import current_synthesis, verify_tasks
from audit_mcp.usecases.workspace import Workspace


def render_packet(ws: Workspace, tx: Tx, run_id: str, packet_id: str) -> str:
    packet = tx.packet(packet_id)
    run = tx.run(run_id, plan=False)
    if packet is None or run is None or packet.run_id != run_id:
        raise NotFoundError(f"packet {packet_id!r} is not in run {run_id!r}; take both ids from the current step")
    cells = list(tx.cells_by_id(run.audit_id, tx.packet_task_ids(packet_id)).values())
    ws.results_dir(run_id).mkdir(parents=True, exist_ok=True)  # the prompt's shell fallback writes there
    results_path, command = ws.results_path(run_id, packet_id), audit_mcp_command()
    threat_model = threat_model_text(tx, run.audit_id)
    if packet.kind == CellKind.CONTEXT:
        # The overview within the budget the dispatching host had (recorded with the run).
        budget = int((tx.run_context(run_id) or {}).get("budget", ws.config().max_packet_tokens))
        return render_context_prompt(
            run_id=run_id,
            packet_id=packet_id,
            cell=cells[0],
            tier=packet.model_tier,
            overview=overview_for(ws, tx, run.audit_id, budget),
            root=ws.root,
            artifacts_dir=ws.artifacts_dir,
            results_path=results_path,
            command=command,
        )
    if packet.kind == CellKind.VERIFY:
        tasks, _ = verify_tasks(current_synthesis(tx, run.audit_id), sorted(cells, key=lambda c: c.task_id))
        return render_verify_prompt(
            prefix=verify_prefix(threat_model),
            run_id=run_id,
            packet_id=packet_id,
            tier=packet.model_tier,
            tasks=tasks,
            root=ws.root,
            artifacts_dir=ws.artifacts_dir,
            results_path=results_path,
            command=command,
        )
    files = {f.path: f for f in tx.files(run.audit_id)}
    grouped: dict[tuple[str, int, int], list[Cell]] = defaultdict(list)
    for cell in cells:
        grouped[(cell.path, cell.start_line, cell.end_line)].append(cell)
    units = tuple(
        Unit(path, start, end, tuple(sorted(group, key=lambda c: c.lens)), unit_tokens(files[path], start, end))
        for (path, start, end), group in sorted(grouped.items())
    )
    plan = PacketPlan(units, packet.estimated_tokens, packet.model_tier, packet.tier_reason)
    return render_packet_prompt(
        prefix=packet_prompt_prefix(resolve_lenses(ws.config()), threat_model),
        run_id=run_id,
        packet_id=packet_id,
        plan=plan,
        files=files,
        edges=tx.edges(run.audit_id),
        root=ws.root,
        artifacts_dir=ws.artifacts_dir,
        results_path=results_path,
        command=command,
        leads=tx.leads(run.audit_id, packet_id),
        requested=tx.open_requeues(run.audit_id, [c.task_id for c in plan.cells]),
    )


def packet_prompt_text(ws: Workspace, run_id: str, packet_id: str) -> str:
    """The packet's prompt: this host's file when it has one, else rendered from the store for this checkout."""
    path = ws.packet_prompt_path(run_id, packet_id)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    with ws.store.read() as tx:
        return render_packet(ws, tx, run_id, packet_id)


def plan_text(ws: Workspace, run_id: str) -> str:
    """The run's dispatch plan: this host's file when it has one, else the plan the store keeps."""
    path = ws.plan_path(run_id)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    with ws.store.read() as tx:
        run = tx.run(run_id)
    if run is None:
        raise NotFoundError(f"run {run_id!r} is unknown; take run_id from the current step")
    return json.dumps(run.plan, indent=2) + "\n"


def plan_file(ws: Workspace, run_id: str) -> None:
    """Write this host's copy of a run's plan from the store, when the store has the run."""
    with ws.store_if_any() as tx:
        run = tx.run(run_id) if tx is not None else None
    if run is not None:
        write_atomic(ws.plan_path(run_id), json.dumps(run.plan) + "\n")
