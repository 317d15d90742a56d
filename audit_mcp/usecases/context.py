"""The context obligation: one packet before the first review run returns the audit's threat model.

At planning, the matrix gains one context cell: pending, or settled with the reason when the config turns
the pass off, the repository is tiny, or an earlier audit's threat model is carried forward. Every review
and verification packet's shared leading block then carries the threat model (or why there is none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.errors import PathError
from audit_mcp.core.fs import read_head
from audit_mcp.engine.opinion_prompts import threat_model_block
from audit_mcp.engine.overview import Overview, build_overview, tiny
from audit_mcp.store.records import (
    CONTEXT_TASK_ID,
    Cell,
    CellKind,
    CellState,
    EntryPoint,
    FileRow,
    Lead,
    ThreatModelRow,
)
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace

CONTEXT_PATH = "."
OVERVIEW_TOKENS = 24_000  # the overview's share of a context packet, before the packet budget caps it


def earlier_threat_model(tx: Tx, audit_id: int) -> tuple[int, ThreatModelRow] | None:
    """The latest threat model an earlier audit of the repository has, with that audit's id."""
    for earlier in sorted((a for a in tx.audit_ids() if a < audit_id), reverse=True):
        row = tx.threat_model(earlier)
        if row is not None:
            return earlier, row
    return None


def named_paths(model: Mapping[str, Any]) -> set[str]:
    """The files and folders a threat model names as entry points, boundaries, sinks and controls."""
    out: set[str] = set()
    for key in ("entry_points", "dangerous_sinks", "controls"):
        out |= {str(item.get("path")) for item in model.get(key, []) if isinstance(item, Mapping) and item.get("path")}
    for boundary in model.get("trust_boundaries", []):
        if isinstance(boundary, Mapping):
            out |= {str(p) for p in boundary.get("paths", []) if p}
    return {p.strip("/") or "." for p in out}


def _changed_under(named: set[str], before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """The files, at or under a named path, whose content differs between ``before`` and ``now`` (by hash)."""

    def under(path: str) -> bool:
        return any(n == "." or path == n or path.startswith(n + "/") for n in named)

    paths = {p for p in (*before, *now) if under(p)}
    return sorted(p for p in paths if before.get(p) != now.get(p))


def context_cell(tx: Tx, audit_id: int, files: list[FileRow], config: SessionConfig, now: str) -> str:
    """Add the context cell of a new audit; returns what the ledger says about it.

    The latest earlier threat model is carried forward while none of the files it names as entry points,
    boundaries, sinks or controls changed; when some did, the context packet is due again, shown that model
    and what changed, to refresh it."""
    state, reason = first_state(files, config)
    earlier = earlier_threat_model(tx, audit_id) if config.carry_forward else None
    if state is CellState.PENDING and earlier is not None:
        source, carried = earlier
        before = {f.path: f.sha256 for f in tx.files(source)}
        changed = _changed_under(named_paths(carried.model), before, {f.path: f.sha256 for f in files})
        if changed:
            shown = ", ".join(changed[:8]) + (f" and {len(changed) - 8} more" if len(changed) > 8 else "")
            reason = f"refresh the threat model of audit {source}: files it names changed ({shown})"
        else:
            state, reason = CellState.CARRIED, f"carried forward from audit {source}: {carried.origin}"
            tx.put_threat_model(
                audit_id,
                task_id=CONTEXT_TASK_ID,
                packet_id=carried.packet_id,
                origin=f"carried forward from audit {source}",
                payload=carried.model,
                now=now,
            )
    tx.insert_cells(audit_id, [context_row(state, reason)], now)
    return (
        "a context packet is due before the first review run" + (f" ({reason})" if reason else "")
        if state is CellState.PENDING
        else str(reason)
    )


def first_state(files: list[FileRow], config: SessionConfig) -> tuple[CellState, str | None]:
    """The context cell's state in a new audit, before any earlier threat model is carried forward."""
    if not config.context_pass:
        return CellState.NOT_APPLICABLE, "context_pass = false in the session config"
    if (why := tiny(files)) is not None:
        return CellState.NOT_APPLICABLE, why
    return CellState.PENDING, None


def context_row(state: CellState, reason: str | None) -> Cell:
    """The audit's one context cell."""
    return Cell(
        CONTEXT_TASK_ID,
        CONTEXT_PATH,
        1,
        1,
        CellKind.CONTEXT.value,
        state,
        0,
        None,
        None,
        reason,
        "",
        CellKind.CONTEXT.value,
        None,
    )


def threat_model_text(tx: Tx, audit_id: int) -> str:
    """The threat model as packets carry it, or why the audit has none."""
    row = tx.threat_model(audit_id)
    if row is not None:
        return threat_model_block(row.model, "")
    cell = tx.cells_by_id(audit_id, [CONTEXT_TASK_ID]).get(CONTEXT_TASK_ID)
    if cell is None:
        return threat_model_block(None, "this audit started before context passes existed")
    if cell.state == CellState.FAILED:
        return threat_model_block(None, f"its context packet failed ({cell.reason or 'no reason given'})")
    return threat_model_block(None, cell.reason or "the context packet has not been answered")


def overview_for(ws: Workspace, tx: Tx, audit_id: int, budget_tokens: int) -> Overview:
    """The repository overview the context packet starts from, within its share of the budget."""
    return overview_of(
        ws,
        tx.files(audit_id),
        tx.weighted_edges(audit_id),
        tx.leads(audit_id),
        budget_tokens,
        entries=tx.entry_points(audit_id),
    )


def overview_of(
    ws: Workspace,
    files: list[FileRow],
    edges: Sequence[tuple[str, str, int]],
    leads: list[Lead],
    budget_tokens: int,
    *,
    entries: Sequence[EntryPoint] = (),
) -> Overview:
    """The overview of a manifest and its code map (``overview_for`` reads them from the store; a forecast
    before any audit has them in hand)."""

    def read(path: str, cap: int) -> bytes | None:
        try:
            return read_head(ws.root, path, cap)
        except PathError:
            return None

    chars = int(min(OVERVIEW_TOKENS, max(4_000, budget_tokens // 2)) * 2.5)
    return build_overview(files, edges, leads, read, chars=chars, entries=entries)


def earlier_model_section(tx: Tx, audit_id: int, cell: Cell) -> str:
    """For a context packet that refreshes an earlier threat model: that model and what changed in the files
    it names (the cell's reason says which); empty for a first threat model."""
    if not (cell.reason or "").startswith("refresh the threat model"):
        return ""
    earlier = earlier_threat_model(tx, audit_id)
    if earlier is None:
        return ""
    source, row = earlier
    changed = (cell.reason or "").split(": ", 1)[-1]
    return (
        f"Audit {source} wrote the threat model below, and since then {changed}. Start from "
        "it: check what those changes touch, keep what still holds, correct what changed, and answer with the "
        "whole updated model.\n\n" + threat_model_block(row.model, "")
    )
