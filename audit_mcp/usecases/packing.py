"""What the next run packs, by kind, in the order the obligations come: the context packet (the threat model)
before any review, review packets, then verification packets once review is done.

Packing reads only; writing a packet's prompt is deferred to a ``Render`` that dispatch calls, so a forecast
(status, quota, the Step) plans exactly what dispatch would open without rendering a prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.batching import head_of_queue
from audit_mcp.engine.codemap.packet_map import MapInputs, map_tokens
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.opinion_packets import context_plan, pack_verifications
from audit_mcp.engine.opinion_prompts import VerifyTask, render_context_prompt, render_verify_prompt, verify_prefix
from audit_mcp.engine.overview import Overview
from audit_mcp.engine.packet_prompts import estimate_tokens, packet_prompt_prefix, render_packet_prompt
from audit_mcp.engine.packets import PacketPlan, pack_units
from audit_mcp.findings.leads import leads_in
from audit_mcp.store.records import AuditRow, Cell, CellKind, CellState, FileRow, Lead
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import history
from audit_mcp.usecases.context import earlier_model_section, overview_for, threat_model_text
from audit_mcp.usecases.mapping import map_inputs
from audit_mcp.usecases.verifying import current_synthesis, verify_tasks
from audit_mcp.usecases.workspace import Workspace

# (run id, packet id, results path, command) -> the packet's prompt, and the analyzer leads it carries.
Render = Callable[[str, str, Path, tuple[str, ...]], tuple[str, list[Lead]]]
# The analyzer leads a packet carries, for a packet whose prompt is written later, from the store.
Carry = Callable[[], list[Lead]]


def _no_leads() -> list[Lead]:
    return []


@dataclass
class Packed:
    """The packets of the next run, all of one kind, with how to write each one's prompt."""

    kind: str
    plans: list[PacketPlan] = field(default_factory=list)
    renders: list[Render] = field(default_factory=list)
    carries: list[Carry] = field(default_factory=list)
    # Verify cells whose finding is no longer reported: dispatch settles them, a forecast leaves them out.
    stale: list[Cell] = field(default_factory=list)
    files: Mapping[str, FileRow] = field(default_factory=dict)


def next_kind(tx: Tx, audit_id: int) -> CellKind:
    """The kind of the next run: context first, then review, then verification (review when none is pending)."""
    counts = tx.cell_counts_by_kind(audit_id)
    for kind in (CellKind.CONTEXT, CellKind.REVIEW, CellKind.VERIFY):
        if counts.get(kind, {}).get(CellState.PENDING, 0):
            return kind
    return CellKind.REVIEW


def pack_next(
    ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, budget: int, limit: int
) -> tuple[Packed, str]:
    """The next run's packets of the kind due now, at most ``limit``, and the prompt prefix they share."""
    kind = next_kind(tx, audit.audit_id)
    if kind is CellKind.CONTEXT:
        return _context(ws, tx, audit, budget), ""
    if kind is CellKind.VERIFY:
        prefix = verify_prefix(threat_model_text(tx, audit.audit_id))
        return _verify(ws, tx, audit, budget, limit, prefix), prefix
    prefix = review_prefix(tx, audit, config)
    return _review(ws, tx, audit, budget, limit, prefix), prefix


def review_prefix(tx: Tx, audit: AuditRow, config: SessionConfig) -> str:
    """The leading block every review packet of the audit shares now."""
    return packet_prompt_prefix(resolve_lenses(config), threat_model_text(tx, audit.audit_id))


def pack_review(
    ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, budget: int, limit: int
) -> list[PacketPlan]:
    """The review packets of the next review run as dispatch would pack them now, whatever kind comes first
    (a forecast of the whole audit packs them before the context pass is done); no prompt is written."""
    return _review(ws, tx, audit, budget, limit, review_prefix(tx, audit, config)).plans


def _review(ws: Workspace, tx: Tx, audit: AuditRow, budget: int, limit: int, prefix: str) -> Packed:
    files = tx.files_in_order(audit.audit_id)  # only the files the head of the queue reaches are read
    # The shared prefix, and the packet's own part of the code map (its size is capped, not known ahead).
    prefix_tokens = estimate_tokens(prefix) + map_tokens(budget)
    queue = tx.queue_units(audit.audit_id)
    try:
        pending = head_of_queue(queue, files, packets=limit, room=max(1, budget - prefix_tokens))
    finally:
        queue.close()
    # Packing follows the code map between files of the head; an edge to a file outside it leads nowhere.
    between = tx.weights_between(audit.audit_id, {u.path for u in pending})
    # A run stays small enough for the host to read its step; the rest waits for the next run.
    out = Packed(CellKind.REVIEW.value, files=files)
    out.plans = pack_units(pending, files, between, budget=budget, prefix_tokens=prefix_tokens, limit=limit)
    inputs: list[MapInputs] = []  # the map touching the run's files, read once by the first prompt rendered

    def code_map() -> MapInputs:
        if not inputs:
            paths = {u.path for plan in out.plans for u in plan.units}
            inputs.append(map_inputs(ws, tx, audit.audit_id, paths, budget))
        return inputs[0]

    unjudged: list[list[Lead]] = []  # the open leads, read once by the first prompt rendered
    scope = history.audit_scope(tx, audit.audit_id)

    def open_leads() -> list[Lead]:
        if not unjudged:
            judged = {v.lead_id for v in tx.verdicts(audit.audit_id)}
            unjudged.append([x for x in tx.leads(audit.audit_id) if x.lead_id not in judged])
        return unjudged[0]

    for plan in out.plans:

        def carry(plan: PacketPlan = plan) -> list[Lead]:
            return leads_in(open_leads(), [(u.path, u.start_line, u.end_line) for u in plan.units])

        def render(
            run_id: str, packet_id: str, results_path: Path, command: tuple[str, ...], plan: PacketPlan = plan
        ) -> tuple[str, list[Lead]]:
            carried = carry(plan)
            text = render_packet_prompt(
                prefix=prefix,
                run_id=run_id,
                packet_id=packet_id,
                plan=plan,
                files=files,
                code_map=code_map(),
                root=ws.root,
                artifacts_dir=ws.artifacts_dir,
                results_path=results_path,
                command=command,
                leads=carried,
                requested=tx.open_requeues(audit.audit_id, [c.task_id for c in plan.cells]),
                earlier=tx.earlier_findings(audit.audit_id, [c.task_id for c in plan.cells]),
                scope=scope,
            )
            return text, carried

        out.renders.append(render)
        out.carries.append(carry)
    return out


def _context(ws: Workspace, tx: Tx, audit: AuditRow, budget: int) -> Packed:
    queue = tx.iter_cells(audit.audit_id, CellState.PENDING, CellKind.CONTEXT)
    try:
        cell = next(iter(queue))
    finally:
        queue.close()
    earlier = earlier_model_section(tx, audit.audit_id, cell)
    render = _context_render(ws, cell, overview_for(ws, tx, audit.audit_id, budget), earlier)
    return Packed(CellKind.CONTEXT.value, [context_plan(cell, sample_tokens(render, ws))], [render], [_no_leads])


def context_packet_tokens(ws: Workspace, cell: Cell, overview: Overview) -> int:
    """The first context packet's estimated tokens for ``overview`` (no earlier threat model to refresh), as
    dispatch counts them."""
    return context_plan(cell, sample_tokens(_context_render(ws, cell, overview, ""), ws)).estimated_tokens


def _context_render(ws: Workspace, cell: Cell, overview: Overview, earlier: str) -> Render:
    def render(run_id: str, packet_id: str, results_path: Path, command: tuple[str, ...]) -> tuple[str, list[Lead]]:
        text = render_context_prompt(
            run_id=run_id,
            packet_id=packet_id,
            cell=cell,
            tier="deep",
            overview=overview,
            root=ws.root,
            artifacts_dir=ws.artifacts_dir,
            results_path=results_path,
            command=command,
            earlier=earlier,
        )
        return text, []

    return render


def sample_tokens(render: Render, ws: Workspace) -> int:
    """A prompt's estimated tokens, rendered with stand-in ids before its run exists."""
    sample, _ = render("R", "P", ws.artifacts_dir, ("audit-mcp",))
    return estimate_tokens(sample)


def _verify(ws: Workspace, tx: Tx, audit: AuditRow, budget: int, limit: int, prefix: str) -> Packed:
    cells = list(tx.iter_cells(audit.audit_id, CellState.PENDING, CellKind.VERIFY))
    tasks, stale = verify_tasks(current_synthesis(tx, audit.audit_id), cells)
    files = {f.path: f for f in tx.files(audit.audit_id)}
    packed = pack_verifications(tasks, files, budget=budget, prefix_tokens=estimate_tokens(prefix))[:limit]
    out = Packed(CellKind.VERIFY.value, stale=stale)
    for plan, members in packed:

        def render(
            run_id: str,
            packet_id: str,
            results_path: Path,
            command: tuple[str, ...],
            plan: PacketPlan = plan,
            members: list[VerifyTask] = members,
        ) -> tuple[str, list[Lead]]:
            text = render_verify_prompt(
                prefix=prefix,
                run_id=run_id,
                packet_id=packet_id,
                tier=plan.tier,
                tasks=members,
                root=ws.root,
                artifacts_dir=ws.artifacts_dir,
                results_path=results_path,
                command=command,
            )
            return text, []

        out.plans.append(plan)
        out.renders.append(render)
        out.carries.append(_no_leads)
    return out
