"""A packet's prompt rendered from the store, for this host's checkout and artifacts directory.

In a shared store the host that dispatched a run is not the one that reviews most of it: every host
renders the prompts of the packets it claims from the store, with its own root and paths, so no host
depends on a file another host wrote. The MCP resources of a packet prompt and of a dispatch plan fall
back to the store the same way, so a host that did not write those files still serves them.

The same rendering writes the prompts of a run's later waves: dispatch writes those of the first waves and
records the prompt prefix the run's packets share; each later prompt is that prefix and its own assignment,
written when the host is about to launch it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

from audit_mcp.core.errors import NotFoundError
from audit_mcp.core.executable import audit_mcp_command
from audit_mcp.core.fs import write_atomic
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.opinion_prompts import render_context_prompt, render_verify_prompt, verify_prefix
from audit_mcp.engine.packet_prompts import packet_prompt_prefix, render_packet_prompt
from audit_mcp.engine.packets import PacketPlan, Unit, unit_tokens
from audit_mcp.store.records import Cell, CellKind
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.context import earlier_model_section, overview_for, threat_model_text
from audit_mcp.usecases.history import audit_scope
from audit_mcp.usecases.mapping import map_inputs
from audit_mcp.usecases.verifying import current_synthesis, verify_tasks
from audit_mcp.usecases.workspace import Workspace


def render_packet(ws: Workspace, tx: Tx, run_id: str, packet_id: str) -> str:
    return render_packets(ws, tx, run_id, [packet_id])[packet_id]


def render_packets(ws: Workspace, tx: Tx, run_id: str, packet_ids: Sequence[str]) -> dict[str, str]:
    """The prompts of ``packet_ids`` (all of run ``run_id``), reading what they share once: the run's prompt
    prefix as dispatch recorded it, the manifest rows and the code map of their files."""
    run = tx.run(run_id, plan=False)
    packets = {p: tx.packet(p) for p in packet_ids}
    for packet_id, packet in packets.items():
        if packet is None or run is None or packet.run_id != run_id:
            raise NotFoundError(f"packet {packet_id!r} is not in run {run_id!r}; take both ids from the current step")
    assert run is not None
    ws.results_dir(run_id).mkdir(parents=True, exist_ok=True)  # the prompt's shell fallback writes there
    command = audit_mcp_command()
    context = tx.run_context(run_id) or {}
    recorded = context.get("prompt_prefix")
    threat_model = threat_model_text(tx, run.audit_id) if recorded is None else ""
    cells = {p: list(tx.cells_by_id(run.audit_id, tx.packet_task_ids(p)).values()) for p in packet_ids}
    files = tx.files_in_order(run.audit_id)
    paths = {c.path for group in cells.values() for c in group}
    budget = int(context.get("budget", ws.config().max_packet_tokens))  # the dispatching host's, as recorded
    code_map = map_inputs(ws, tx, run.audit_id, paths, budget)
    out: dict[str, str] = {}
    scope = audit_scope(tx, run.audit_id)
    for packet_id in packet_ids:
        packet = packets[packet_id]
        assert packet is not None
        results_path = ws.results_path(run_id, packet_id)
        mine = cells[packet_id]
        if packet.kind == CellKind.CONTEXT:
            # The overview within the budget the dispatching host had.
            out[packet_id] = render_context_prompt(
                run_id=run_id,
                packet_id=packet_id,
                cell=mine[0],
                tier=packet.model_tier,
                overview=overview_for(ws, tx, run.audit_id, budget),
                root=ws.root,
                artifacts_dir=ws.artifacts_dir,
                results_path=results_path,
                command=command,
                earlier=earlier_model_section(tx, run.audit_id, mine[0]),
            )
            continue
        if packet.kind == CellKind.VERIFY:
            tasks, _ = verify_tasks(current_synthesis(tx, run.audit_id), sorted(mine, key=lambda c: c.task_id))
            out[packet_id] = render_verify_prompt(
                prefix=str(recorded) if recorded is not None else verify_prefix(threat_model),
                run_id=run_id,
                packet_id=packet_id,
                tier=packet.model_tier,
                tasks=tasks,
                root=ws.root,
                artifacts_dir=ws.artifacts_dir,
                results_path=results_path,
                command=command,
            )
            continue
        grouped: dict[tuple[str, int, int], list[Cell]] = defaultdict(list)
        for cell in mine:
            grouped[(cell.path, cell.start_line, cell.end_line)].append(cell)
        units = tuple(
            Unit(path, start, end, tuple(sorted(group, key=lambda c: c.lens)), unit_tokens(files[path], start, end))
            for (path, start, end), group in sorted(grouped.items())
        )
        plan = PacketPlan(units, packet.estimated_tokens, packet.model_tier, packet.tier_reason)
        prefix = (
            str(recorded) if recorded is not None else packet_prompt_prefix(resolve_lenses(ws.config()), threat_model)
        )
        out[packet_id] = render_packet_prompt(
            prefix=prefix,
            run_id=run_id,
            packet_id=packet_id,
            plan=plan,
            files=files,
            code_map=code_map,
            root=ws.root,
            artifacts_dir=ws.artifacts_dir,
            results_path=results_path,
            command=command,
            leads=tx.leads(run.audit_id, packet_id),
            requested=tx.open_requeues(run.audit_id, [c.task_id for c in plan.cells]),
            earlier=tx.earlier_findings(run.audit_id, [c.task_id for c in plan.cells]),
            scope=scope,
        )
    return out


def prompts_ahead(waves: Sequence[int]) -> int:
    """How many packets, in launch order, have their prompt written before the host is told to launch them:
    two waves' worth (for a rolling host, two widths), so launching one wave never waits for the next one's."""
    return sum(waves[:2])


def write_prompts(ws: Workspace, run_id: str, packet_ids: Sequence[str]) -> None:
    """Write the prompt files of ``packet_ids``, rendered from the store, before a host is told to launch them.

    Dispatch writes the prompts of a run's first waves only; the calls a host makes between launches
    (``plan_status``, ``next_step``, a wave's launch list) write those of the packets it launches next. A
    prompt file is never trusted for what it holds: unless this process wrote it and it has not changed
    since (``Workspace.wrote``), it is rendered again and rewritten when it differs. Each file is written
    whole or not at all, so a crash never leaves a subagent half a prompt.
    """
    stale = [p for p in packet_ids if not ws.wrote(ws.packet_prompt_path(run_id, p))]
    if not stale:
        return
    with ws.store.read() as tx:
        texts = render_packets(ws, tx, run_id, stale)
    for packet_id, text in texts.items():
        ws.write_rendered(ws.packet_prompt_path(run_id, packet_id), text)


def packet_prompt_text(ws: Workspace, run_id: str, packet_id: str) -> str:
    """The packet's prompt, rendered from the store for this checkout (a file on disk is never read back)."""
    with ws.store.read() as tx:
        return render_packet(ws, tx, run_id, packet_id)


def plan_text(ws: Workspace, run_id: str) -> str:
    """The run's dispatch plan as the store keeps it (a file on disk is never read back)."""
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
