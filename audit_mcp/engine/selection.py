"""Choosing cells of the coverage matrix by file, lens, task or finding, and whether each may be requeued.

Pure: the cells and the choice in, the chosen cells out. Files are repo-relative paths or gitignore-style
globs (``app/**``, ``*.py``); files and lenses narrow each other (the files' cells under those lenses);
tasks and findings add their own cells. A finding chooses the cells of its file whose lines overlap it,
under the lenses that reported it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from audit_mcp.engine.globs import compile_globs
from audit_mcp.store.records import Cell, CellState

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class Place:
    """Where a finding is: its file, lines and the lenses that reported it."""

    file: str
    start_line: int
    end_line: int
    lenses: tuple[str, ...]


def choose(
    cells: Iterable[Cell],
    *,
    files: Sequence[str] = (),
    lenses: Sequence[str] = (),
    tasks: Sequence[str] = (),
    places: Sequence[Place] = (),
) -> list[Cell]:
    """The cells the choice names, in matrix order, each once."""
    spec = compile_globs([f for f in files if _GLOB_CHARS & set(f)], source="--file")
    exact = {f.strip("/") for f in files if not _GLOB_CHARS & set(f)}
    wanted_tasks = {t.strip().upper() for t in tasks}
    wanted_lenses = set(lenses)
    chosen = []
    for cell in cells:
        by_file = (cell.path in exact or spec.match(cell.path)) if files else bool(lenses)
        by_lens = not wanted_lenses or cell.lens in wanted_lenses
        named = cell.task_id in wanted_tasks or any(_at(cell, p) for p in places)
        if (by_file and by_lens) or named:
            chosen.append(cell)
    return chosen


def _at(cell: Cell, place: Place) -> bool:
    return (
        cell.path == place.file
        and cell.lens in place.lenses
        and cell.start_line <= place.end_line
        and place.start_line <= cell.end_line
    )


def requeue_refusal(cell: Cell, file_reviewable: bool) -> str | None:
    """Why a chosen cell cannot go back to review now, or None when it can."""
    if cell.state == CellState.ASSIGNED:
        return (
            f"handed out in packet {cell.packet_id} of the open run {cell.run_id}; requeue it after that run is merged"
        )
    if cell.state == CellState.SKIPPED and not file_reviewable:
        return f"skipped ({cell.reason}); its file cannot be reviewed, so change the scope in the config instead"
    return None
