"""The coverage matrix: one cell per (file or line-range chunk, lens), and what it adds up to."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.languages import chars_per_token
from audit_mcp.store.records import OPEN_STATES, Cell, CellState, FileRow, Matrix
from audit_mcp.store.units import task_id

# One file or chunk takes at most this share of a packet's token budget (the rest: the prompt, other files).
UNIT_BUDGET_SHARE = 0.5


def chunk_ranges(line_count: int, threshold: int, chunk_lines: int, cuts: Sequence[int] = ()) -> list[tuple[int, int]]:
    """Line ranges for a file: the whole file, or chunks of at most ``chunk_lines`` past ``threshold``. Given
    ``cuts`` (the lines a chunk may start at: definitions, from the code map), each chunk ends just before the
    last cut that keeps it within ``chunk_lines`` and at least a quarter of them long, so no definition is
    split where a whole one fits; without a cut in reach it ends at ``chunk_lines``."""
    if line_count <= threshold:
        return [(1, max(1, line_count))]
    out: list[tuple[int, int]] = []
    start = 1
    shortest = max(1, chunk_lines // 4)
    while start <= line_count:
        limit = start + chunk_lines - 1
        end = min(line_count, limit)
        if end < line_count and cuts:
            # The last cut in (start + shortest, limit + 1]: the chunk ends on the line before it.
            at = bisect.bisect_right(cuts, limit + 1) - 1
            if at >= 0 and cuts[at] > start + shortest:
                end = cuts[at] - 1
        out.append((start, end))
        start = end + 1
    return out


def max_unit_chars(language: str, config: SessionConfig) -> int:
    """The most characters one file or chunk may hold and still fit a packet of ``max_packet_tokens``."""
    return int(config.max_packet_tokens * UNIT_BUDGET_SHARE * chars_per_token(language))


def chunk_limits(row: FileRow, config: SessionConfig) -> tuple[int, int]:
    """The line threshold past which a file is chunked, and the lines a chunk holds at most: fewer when its
    lines are long, so that no chunk's estimated tokens exceed its share of a packet (a file of few, wide
    lines is split by its size, not only by its line count)."""
    lines = max(1, row.line_count)
    per_chunk = config.chunk_lines
    threshold = config.chunk_threshold_lines
    room = max_unit_chars(row.language, config)
    if row.size > room:
        per_chunk = max(1, min(per_chunk, room * lines // max(1, row.size)))
        threshold = min(threshold, per_chunk)
    return threshold, per_chunk


def file_ranges(row: FileRow, config: SessionConfig) -> list[tuple[int, int]]:
    """The line ranges a file is reviewed in (``chunk_limits``), chunks ending at its definitions where the
    code map found them (``FileRow.cuts``)."""
    threshold, per_chunk = chunk_limits(row, config)
    return chunk_ranges(row.line_count, threshold, per_chunk, decode_cuts(row.cuts))


def encode_cuts(cuts: Sequence[int]) -> str | None:
    """The lines a chunk may start at, as the manifest keeps them."""
    return ",".join(map(str, cuts)) if cuts else None


def decode_cuts(text: str | None) -> list[int]:
    if not text:
        return []
    out = []
    for part in text.split(","):
        if part.isdigit():
            out.append(int(part))
    return sorted(out)


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
