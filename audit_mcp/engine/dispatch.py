"""Turning packet plans into a run: packet ids, prompt files and the dispatch plan."""

from __future__ import annotations

import json
import shlex
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit_mcp.engine.lenses import Lens
from audit_mcp.engine.packets import PacketPlan
from audit_mcp.engine.templates import render
from audit_mcp.findings.leads import Lead, render_leads
from audit_mcp.scheduling.limits import balanced_waves
from audit_mcp.store.tx import Cell, FileRow

TIER_ORDER = {"deep": 0, "standard": 1, "small": 2}


def _lens_section(lens: Lens) -> str:
    lines = lens.text.strip().splitlines()
    out = [f"### Lens `{lens.lens_id}`: {lens.title}"]
    for line in lines[1:]:
        out.append("#### " + line[3:] if line.startswith("## ") else line)
    return "\n".join(out)


def packet_prompt_prefix(lenses: Sequence[Lens]) -> str:
    """The leading block every packet prompt of an audit shares byte for byte (for prompt caches)."""
    return render("packet/prefix.md", lenses="\n\n".join(_lens_section(lens) for lens in lenses))


def estimate_tokens(text: str) -> int:
    return int(len(text) / 2.5) + 1


@dataclass(frozen=True)
class PacketSpec:
    packet_id: str
    plan: PacketPlan
    prompt_path: Path


def _task_table(cells: Sequence[Cell]) -> str:
    rows = ["| task_id | file | lines | lens |", "|---|---|---|---|"]
    rows += [f"| {c.task_id} | `{c.path}` | {c.start_line}-{c.end_line} | {c.lens} |" for c in cells]
    return "\n".join(rows)


def _file_table(plan: PacketPlan, files: Mapping[str, FileRow]) -> tuple[str, str]:
    rows = ["| file | language | lines in file | read lines |", "|---|---|---|---|"]
    chunk_notes = []
    for unit in plan.units:
        row = files[unit.path]
        whole = unit.start_line == 1 and unit.end_line >= row.line_count
        rows.append(
            f"| `{unit.path}` | {row.language} | {row.line_count} | "
            f"{'all' if whole else f'{unit.start_line}-{unit.end_line}'} |"
        )
        if not whole:
            chunk_notes.append(
                f"- `{unit.path}` is {row.line_count} lines long: review lines {unit.start_line}-{unit.end_line} "
                f"only (read that range with your file tool's offset/limit, plus whatever surrounding code you "
                f"need to understand it); other chunks are other tasks."
            )
    notes = "\n".join(chunk_notes) if chunk_notes else "Every file above is to be read in full."
    return "\n".join(rows), notes


def _import_context(plan: PacketPlan, edges: Sequence[tuple[str, str]]) -> str:
    paths = {u.path for u in plan.units}
    imports: dict[str, list[str]] = defaultdict(list)
    imported_by: dict[str, list[str]] = defaultdict(list)
    for src, dst in edges:
        if src in paths:
            imports[src].append(dst)
        if dst in paths:
            imported_by[dst].append(src)
    lines = []
    for path in sorted(paths):
        if imports[path] or imported_by[path]:
            parts = []
            if imports[path]:
                parts.append("imports " + ", ".join(f"`{p}`" for p in imports[path][:12]))
            if imported_by[path]:
                parts.append("is imported by " + ", ".join(f"`{p}`" for p in imported_by[path][:12]))
            lines.append(f"- `{path}` " + "; ".join(parts))
    return "\n".join(lines) if lines else "No import edges were found for these files."


def _skeleton(cells: Sequence[Cell]) -> str:
    items = [
        {"task_id": c.task_id, "status": "reviewed", "summary": "<what you examined, and why it is clear or not>",
         "findings": []}
        for c in cells[:3]
    ]
    return json.dumps(items, indent=2)


def _previous(cells: Sequence[Cell]) -> str:
    notes = sorted({f"- {c.task_id} (`{c.path}`, {c.lens}): {c.reason}" for c in cells if c.attempts and c.reason})
    if not notes:
        return "This is the first attempt at these tasks."
    return (
        "These tasks were handed out before and not finished. What went wrong then; avoid it this time "
        "(for example, submit partial work early rather than run out of budget):\n" + "\n".join(notes)
    )


def render_packet_prompt(
    *,
    prefix: str,
    run_id: str,
    packet_id: str,
    plan: PacketPlan,
    files: Mapping[str, FileRow],
    edges: Sequence[tuple[str, str]],
    root: Path,
    artifacts_dir: Path,
    leads: Sequence[Lead] = (),
) -> str:
    cells = plan.cells
    file_table, chunk_notes = _file_table(plan, files)
    results_path = artifacts_dir / "runs" / run_id / "results" / f"{packet_id}.json"
    cli = (
        f"audit-mcp submit-packet --root {shlex.quote(str(root))} --artifacts-dir "
        f"{shlex.quote(str(artifacts_dir))} --run-id {run_id} --packet-id {packet_id} "
        f"--results {shlex.quote(str(results_path))}"
    )
    assignment = render(
        "packet/assignment.md",
        run_id=run_id,
        packet_id=packet_id,
        model_tier=plan.tier,
        repo_root=str(root),
        task_count=str(len(cells)),
        task_table=_task_table(cells),
        file_table=file_table,
        chunk_notes=chunk_notes,
        import_context=_import_context(plan, edges),
        analyzer_leads=render_leads(leads),
        previous_attempt=_previous(cells),
        results_skeleton=_skeleton(cells),
        results_path=str(results_path),
        submit_cli=cli,
    )
    return prefix.rstrip() + "\n\n" + assignment


def dispatch_plan(
    *,
    run_id: str,
    kind: str,
    specs: Sequence[PacketSpec],
    wave_cap: int,
    cooldown_until: str | None,
    order: Sequence[str] | None = None,
    schedule: Mapping[str, Any] | None = None,
    launch_offsets: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The dispatch plan of a run; packets in launch order (the scheduler's, else deepest and largest first).

    ``launch_offsets`` paces the starts: a packet's ``not_before_seconds`` counts from the moment the run's
    first subagent started.
    """
    offsets = launch_offsets or {}
    ordered = sorted(specs, key=lambda s: (TIER_ORDER[s.plan.tier], -s.plan.estimated_tokens, s.packet_id))
    if order is not None:
        position = {packet_id: n for n, packet_id in enumerate(order)}
        ordered.sort(key=lambda s: position.get(s.packet_id, len(position)))
    waves = balanced_waves(len(ordered), wave_cap)
    return {
        "run_id": run_id,
        "kind": kind,
        "wave_size": waves[0] if waves else 0,
        "waves": waves,
        "cooldown_until": cooldown_until,
        "estimated_wave_tokens": sum(s.plan.estimated_tokens for s in ordered[: waves[0] if waves else 0]),
        "estimated_total_tokens": sum(s.plan.estimated_tokens for s in ordered),
        "launch_order": [s.packet_id for s in ordered],
        "schedule": dict(schedule or {}),
        "packets": [
            {
                "packet_id": s.packet_id,
                "prompt_path": str(s.prompt_path),
                "prompt_uri": f"audit://runs/{run_id}/packets/{s.packet_id}/prompt",
                "estimated_tokens": s.plan.estimated_tokens,
                "not_before_seconds": round(float(offsets.get(s.packet_id, 0.0)), 1),
                "model_hint": {"tier": s.plan.tier, "why": s.plan.tier_reason},
                "tasks": [
                    {"task_id": c.task_id, "file": c.path, "start_line": c.start_line, "end_line": c.end_line,
                     "lens": c.lens}
                    for c in s.plan.cells
                ],
            }
            for s in ordered
        ],
    }
