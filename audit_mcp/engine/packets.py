"""Packing review tasks into packets: one subagent's worth of work.

Pure: cells, file facts, import edges and a token budget in; packet plans
out. A file (or chunk) reviewed under several lenses is read once, related
files (import edges, then the same directory) travel together, and every
packet's estimated tokens stay inside the budget.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from audit_mcp.engine.languages import chars_per_token
from audit_mcp.engine.lenses import RISK_LENSES
from audit_mcp.store.records import Cell, FileRow

TOKENS_PER_TASK = 700  # the reviewer's notes and answer for one (unit, lens) task
MAX_FILES_PER_PACKET = 24
MAX_TASKS_PER_PACKET = 120


@dataclass(frozen=True)
class Unit:
    """One file or line-range chunk, with every lens it is reviewed under in this run."""

    path: str
    start_line: int
    end_line: int
    cells: tuple[Cell, ...]
    tokens: int


@dataclass(frozen=True)
class PacketPlan:
    units: tuple[Unit, ...]
    estimated_tokens: int
    tier: str
    tier_reason: str

    @property
    def cells(self) -> list[Cell]:
        return [c for u in self.units for c in u.cells]


def unit_tokens(row: FileRow, start: int, end: int) -> int:
    share = (end - start + 1) / max(1, row.line_count)
    return max(1, int(row.size * min(1.0, share) / chars_per_token(row.language)) + 1)


def _units(cells: Sequence[Cell], files: Mapping[str, FileRow], room: int) -> list[Unit]:
    grouped: dict[tuple[str, int, int], list[Cell]] = defaultdict(list)
    for cell in cells:
        grouped[(cell.path, cell.start_line, cell.end_line)].append(cell)
    units = []
    for (path, start, end), group in sorted(grouped.items()):
        group.sort(key=lambda c: c.lens)
        read = unit_tokens(files[path], start, end)
        # All lenses of a file share one read, unless that does not fit: then the lenses are split up.
        per_unit = max(1, (room - read) // TOKENS_PER_TASK)
        for i in range(0, len(group), per_unit):
            part = group[i : i + per_unit]
            units.append(Unit(path, start, end, tuple(part), read + TOKENS_PER_TASK * len(part)))
    return units


def _tier(units: Sequence[Unit], tokens: int, budget: int) -> tuple[str, str]:
    lenses = {c.lens for u in units for c in u.cells}
    risky = sorted(lenses & RISK_LENSES)
    lines = sum(u.end_line - u.start_line + 1 for u in units)
    if risky and (tokens > budget * 0.6 or lines > 1_500):
        return "deep", f"{lines} lines under risk lens(es) {', '.join(risky)}"
    if risky:
        return "standard", f"risk lens(es) {', '.join(risky)} on {lines} lines"
    if tokens < 15_000:
        return "small", f"{lines} lines under lower-risk lenses only"
    return "standard", f"{lines} lines under lower-risk lenses"


def pack(
    cells: Sequence[Cell],
    files: Mapping[str, FileRow],
    edges: Sequence[tuple[str, str]],
    *,
    budget: int,
    prefix_tokens: int,
    limit: int | None = None,
) -> list[PacketPlan]:
    """Group ``cells`` into packets whose estimate (prompt prefix included) fits ``budget``; with ``limit``, the
    first ``limit`` of them only (each packet is filled before the next starts, so they are the same).

    A single unit bigger than the budget still gets a packet of its own (the
    caller chunks files, so this only happens with tiny budgets) and is marked
    ``deep``.
    """
    room = max(1, budget - prefix_tokens)
    units = _units(cells, files, room)
    by_path: dict[str, list[int]] = defaultdict(list)
    for i, unit in enumerate(units):
        by_path[unit.path].append(i)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for src, dst in edges:
        neighbours[src].add(dst)
        neighbours[dst].add(src)
    folders = [posixpath.dirname(u.path) for u in units]  # read at every step of the scan below
    assigned = [False] * len(units)
    plans: list[PacketPlan] = []
    cursor = 0
    while limit is None or len(plans) < limit:
        while cursor < len(units) and assigned[cursor]:
            cursor += 1
        if cursor >= len(units):
            break
        builder = _Builder(units, assigned, neighbours, room)
        builder.take(cursor)
        # Chunks of one file stay together first, then import neighbours, then the same directory.
        for i in by_path[units[cursor].path]:
            builder.offer(i)
        while builder.frontier:
            for i in by_path.get(builder.frontier.popleft(), []):
                builder.offer(i)
        seed_dir = folders[cursor]
        scan, misses = cursor + 1, 0
        while scan < len(units) and misses < 64:
            if not assigned[scan]:
                # After a few misses, any directory will do: a full packet beats a tidy one.
                same_dir = folders[scan] == seed_dir
                if not ((same_dir or misses >= 8) and builder.offer(scan)):
                    misses += 1
            scan += 1
        chosen_units = tuple(units[i] for i in sorted(builder.chosen))
        estimate = prefix_tokens + builder.used
        tier, reason = _tier(chosen_units, estimate, budget)
        if estimate > budget:
            tier, reason = "deep", f"one unit of {estimate} tokens exceeds the packet budget of {budget}"
        plans.append(PacketPlan(chosen_units, estimate, tier, reason))
    return plans


class _Builder:
    """One packet being filled."""

    def __init__(
        self, units: Sequence[Unit], assigned: list[bool], neighbours: Mapping[str, set[str]], room: int
    ) -> None:
        self.units, self.assigned, self.neighbours, self.room = units, assigned, neighbours, room
        self.chosen: list[int] = []
        self.used = 0
        self.tasks = 0
        self.paths: set[str] = set()
        self.frontier: deque[str] = deque()

    def fits(self, i: int) -> bool:
        unit = self.units[i]
        new_file = unit.path not in self.paths
        return (
            self.used + unit.tokens <= self.room
            and self.tasks + len(unit.cells) <= MAX_TASKS_PER_PACKET
            and (not new_file or len(self.paths) < MAX_FILES_PER_PACKET)
        )

    def offer(self, i: int) -> bool:
        if self.assigned[i] or not self.fits(i):
            return False
        self.take(i)
        return True

    def take(self, i: int) -> None:
        unit = self.units[i]
        self.assigned[i] = True
        self.chosen.append(i)
        self.used += unit.tokens
        self.tasks += len(unit.cells)
        if unit.path not in self.paths:
            self.paths.add(unit.path)
            self.frontier.extend(sorted(self.neighbours.get(unit.path, set()) - self.paths))
