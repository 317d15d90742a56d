"""The context obligation: one packet before the first review run returns the audit's threat model.

At planning, the matrix gains one context cell: pending, or settled with the reason when the config turns
the pass off, the repository is tiny, or an earlier audit's threat model is carried forward. Every review
and verification packet's shared leading block then carries the threat model (or why there is none).
"""

from __future__ import annotations

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.errors import PathError
from audit_mcp.core.fs import read_head
from audit_mcp.engine.opinion_prompts import threat_model_block
from audit_mcp.engine.overview import Overview, build_overview, tiny
from audit_mcp.store.records import CONTEXT_TASK_ID, Cell, CellKind, CellState, FileRow
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace

CONTEXT_PATH = "."
OVERVIEW_TOKENS = 24_000  # the overview's share of a context packet, before the packet budget caps it


def context_cell(tx: Tx, audit_id: int, files: list[FileRow], config: SessionConfig, now: str) -> str:
    """Add the context cell of a new audit; returns what the ledger says about it."""
    state, reason = CellState.PENDING, None
    previous = tx.previous_audit_id(audit_id)
    carried = tx.threat_model(previous) if previous is not None and config.carry_forward else None
    if not config.context_pass:
        state, reason = CellState.NOT_APPLICABLE, "context_pass = false in the session config"
    elif (why := tiny(files)) is not None:
        state, reason = CellState.NOT_APPLICABLE, why
    elif carried is not None:
        state, reason = CellState.REVIEWED, f"carried forward from audit {previous}: {carried.origin}"
        tx.put_threat_model(
            audit_id,
            task_id=CONTEXT_TASK_ID,
            packet_id=carried.packet_id,
            origin=f"carried forward from audit {previous}",
            payload=carried.model,
            now=now,
        )
    cell = Cell(
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
    tx.insert_cells(audit_id, [cell], now)
    return "a context packet is due before the first review run" if state is CellState.PENDING else str(reason)


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
    files = tx.files(audit_id)

    def read(path: str, cap: int) -> bytes | None:
        try:
            return read_head(ws.root, path, cap)
        except PathError:
            return None

    chars = int(min(OVERVIEW_TOKENS, max(4_000, budget_tokens // 2)) * 2.5)
    return build_overview(files, tx.edges(audit_id), tx.leads(audit_id), read, chars=chars)
