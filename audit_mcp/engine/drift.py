"""Files that changed after intake: their cells go back to pending, by content hash.

A review is only worth what the bytes it read are worth. Before a run's cells count as covered, and
again before the report is written, the files concerned are read again; a file whose content hash
differs from the manifest gets its manifest row updated, its findings withdrawn, and its cells put back
to pending (or skipped, when the file is now deleted, binary or too big) with the reason recorded.
Reading happens outside the write transaction; applying checks the manifest row is still the one read.
A file whose status still says what it said when it was hashed (``file_stat``) is known unchanged without
reading it; one read again with the same bytes gets its status record refreshed, and nothing else changes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.models import RequeuedTask
from audit_mcp.engine import file_stat
from audit_mcp.engine.coverage import build_cells, file_ranges
from audit_mcp.engine.git_listing import repository_attributes
from audit_mcp.engine.intake import rescan
from audit_mcp.engine.scoping import Scoper
from audit_mcp.store.records import Cell, CellKind, CellState, FileRow
from audit_mcp.store.tx import Tx
from audit_mcp.store.units import task_id


@dataclass(frozen=True)
class Drift:
    before: FileRow
    after: FileRow

    @property
    def same_bytes(self) -> bool:
        """Read again and found as it was: only the record of its status is new."""
        return self.after.sha256 == self.before.sha256 and self.after.scope == self.before.scope

    @property
    def why(self) -> str:
        if self.after.scope != "review":
            return f"changed after intake and is now skipped: {self.after.skip_reason}"
        return f"content changed after intake (sha256 {self.before.sha256[:12]} → {self.after.sha256[:12]})"


def unsettled(root: Path, config: SessionConfig, files: Iterable[FileRow]) -> tuple[Scoper, list[FileRow]]:
    """The in-scope files whose status does not vouch for the bytes the manifest hashed (``file_stat``), so
    they must be read again to know; and the scope rules they are read under."""
    in_scope = [row for row in files if row.scope == "review"]
    scoper = Scoper(config, repository_attributes(root, [row.path for row in in_scope]))
    base = f"{root.resolve()}{os.sep}"
    return scoper, [row for row in in_scope if not file_stat.unchanged(base + row.path, row.stat, scoper, row.path)]


def detect(root: Path, config: SessionConfig, files: Iterable[FileRow]) -> list[Drift]:
    """The in-scope files whose bytes on disk no longer match the manifest, and those read again with the
    same bytes under a new status record (``Drift.same_bytes``)."""
    scoper, reread = unsettled(root, config, files)
    real_root = root.resolve()
    out = []
    for row in reread:
        now = rescan(real_root, row.path, scoper)
        if now.sha256 != row.sha256 or now.scope != row.scope or now.stat != row.stat:
            out.append(Drift(row, now))
    return out


def apply(tx: Tx, audit_id: int, config: SessionConfig, drifts: Iterable[Drift], now: str) -> list[RequeuedTask]:
    """Put the cells of changed files back to pending (or skipped) inside the caller's transaction."""
    requeued: list[RequeuedTask] = []
    for drift in drifts:
        current = tx.file(audit_id, drift.before.path)
        if current is None or current.sha256 != drift.before.sha256:
            continue  # another process already recorded this change
        if drift.same_bytes:
            if drift.after.stat is not None:
                tx.update_file(audit_id, drift.after)
            continue
        on_path = tx.cells_for_path(audit_id, drift.before.path)
        if any(c.state == CellState.ASSIGNED for c in on_path):
            continue  # held by a run in flight; its merge checks the file again
        tx.update_file(audit_id, drift.after)
        cells = [c for c in on_path if c.kind == CellKind.REVIEW]
        task_ids = [c.task_id for c in cells]
        withdrawn = tx.delete_findings(audit_id, task_ids)
        # Second opinions on the withdrawn findings go with them; the findings of the new review get theirs.
        stale = [c.task_id for c in on_path if c.kind == CellKind.VERIFY]
        tx.delete_finding_verdicts(audit_id, stale)
        tx.delete_cells(audit_id, stale)
        state = CellState.PENDING if drift.after.scope == "review" else CellState.SKIPPED
        fresh = _cells_for(drift.after, cells, config, tx.max_task_number(audit_id))
        if fresh is not None:
            tx.delete_cells(audit_id, task_ids)
            tx.insert_cells(audit_id, [_with(c, state, drift.why) for c in fresh], now)
            cells = fresh
        else:
            for cell in cells:
                tx.reset_cell(
                    audit_id, cell.task_id, state=state, content_hash=drift.after.sha256, reason=drift.why, now=now
                )
        tx.log(
            now=now,
            audit_id=audit_id,
            actor="engine",
            action="file_changed",
            detail=f"{drift.before.path}: {drift.why}; {len(cells)} cell(s) back to {state.value}, "
            f"{withdrawn} finding(s) withdrawn" + (f", {len(stale)} verification(s) dropped" if stale else ""),
            outcome="requeued",
        )
        if state is CellState.PENDING:
            requeued += [
                RequeuedTask(task_id=c.task_id, file=c.path, lens=c.lens, why=drift.why, state="pending") for c in cells
            ]
    return requeued


def _cells_for(after: FileRow, cells: list[Cell], config: SessionConfig, last: int) -> list[Cell] | None:
    """New cells when the file's line ranges changed; ``None`` when the old cells still fit."""
    if after.scope != "review":
        return None
    ranges = file_ranges(after, config)
    if sorted({(c.start_line, c.end_line) for c in cells}) == ranges:
        return None
    lenses = {c.lens for c in cells}
    out = []
    for cell in build_cells([after], config):
        if cell.lens in lenses:
            last += 1
            out.append(_renumber(cell, task_id(last)))
    return out


def _renumber(cell: Cell, task_id: str) -> Cell:
    return Cell(
        task_id,
        cell.path,
        cell.start_line,
        cell.end_line,
        cell.lens,
        cell.state,
        0,
        None,
        None,
        None,
        cell.content_hash,
    )


def _with(cell: Cell, state: str, reason: str) -> Cell:
    return Cell(
        cell.task_id,
        cell.path,
        cell.start_line,
        cell.end_line,
        cell.lens,
        state,
        0,
        None,
        None,
        reason,
        cell.content_hash,
    )
