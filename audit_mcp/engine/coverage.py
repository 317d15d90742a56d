"""The coverage matrix: one cell per (file or line-range chunk, lens), and what it adds up to."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.languages import chars_per_token
from audit_mcp.store.records import OPEN_STATES, Cell, CellState, FileRow, Matrix
from audit_mcp.store.units import task_id

# One file or chunk takes at most this share of a packet's token budget (the rest: the prompt, other files).
UNIT_BUDGET_SHARE = 0.5


def chunk_ranges(line_count: int, threshold: int, chunk_lines: int) -> list[tuple[int, int]]:
    """Line ranges for a file: the whole file, or chunks of ``chunk_lines`` past ``threshold``."""
    if line_count <= threshold:
        return [(1, max(1, line_count))]
    return [(start, min(line_count, start + chunk_lines - 1)) for start in range(1, line_count + 1, chunk_lines)]


def max_unit_chars(language: str, config: SessionConfig) -> int:
    """The most characters one file or chunk may hold and still fit a packet of ``max_packet_tokens``."""
    return int(config.max_packet_tokens * UNIT_BUDGET_SHARE * chars_per_token(language))


def file_ranges(row: FileRow, config: SessionConfig) -> list[tuple[int, int]]:
    """The line ranges a file is reviewed in: chunks past the line threshold, and chunks of fewer lines when
    its lines are long, so that no chunk's estimated tokens exceed its share of a packet (a file of few,
    wide lines is split by its size, not only by its line count)."""
    lines = max(1, row.line_count)
    per_chunk = config.chunk_lines
    threshold = config.chunk_threshold_lines
    room = max_unit_chars(row.language, config)
    if row.size > room:
        per_chunk = max(1, min(per_chunk, room * lines // max(1, row.size)))
        threshold = min(threshold, per_chunk)
    return chunk_ranges(row.line_count, threshold, per_chunk)


def build_matrix(files: Sequence[FileRow], config: SessionConfig) -> Matrix:
    """The units of every file in scope, in a stable order, and the lenses that apply to each."""
    # The lens rules (and pathspec's patterns) for planning only: status and the merge count cells here.
    from audit_mcp.engine.file_kinds import FileKind
    from audit_mcp.engine.lens_map import LensSelector

    selector = LensSelector(config)
    sets: dict[tuple[str, ...], int] = {}
    units: list[tuple[str, int, int, str, int]] = []
    for row in files:
        if row.scope != "review":
            continue
        lenses = tuple(selector.for_path(row.path, FileKind(row.kind)))
        if not lenses:
            continue
        index = sets.setdefault(lenses, len(sets))
        for start, end in file_ranges(row, config):
            units.append((row.path, start, end, row.sha256, index))
    return Matrix(units, list(sets))


def build_cells(files: Sequence[FileRow], config: SessionConfig) -> list[Cell]:
    """Every cell of the matrix, in a stable order with stable task ids."""
    matrix = build_matrix(files, config)
    cells: list[Cell] = []
    for path, start, end, content_hash, index in matrix.units:
        for lens in matrix.lens_sets[index]:
            cells.append(
                Cell(
                    task_id(len(cells) + 1),
                    path,
                    start,
                    end,
                    lens,
                    CellState.PENDING,
                    0,
                    None,
                    None,
                    None,
                    content_hash,
                )
            )
    return cells


def completeness(counts: Mapping[str, int]) -> str:
    """``complete`` when every cell is reviewed or not applicable; ``partial`` when the audit
    ended with gaps, or with no cell at all (it reviewed nothing, so it proves nothing); ``unknown``
    while cells are still open."""
    if not any(counts.values()):
        return "partial"
    if any(counts.get(s, 0) for s in OPEN_STATES):
        return "unknown"
    if any(counts.get(s, 0) for s in (CellState.FAILED, CellState.SKIPPED)):
        return "partial"
    return "complete"


def totals(counts: Mapping[str, int]) -> dict[str, int]:
    out = {state.value: int(counts.get(state.value, 0)) for state in CellState}
    out["total"] = sum(out.values())
    return out


def gaps(cells: Iterable[Cell]) -> list[Cell]:
    """Cells that ended without a review: failed or skipped."""
    return [c for c in cells if c.state in (CellState.FAILED, CellState.SKIPPED)]
