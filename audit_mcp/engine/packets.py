"""Packing review tasks into packets: one subagent's worth of work.

Pure: cells, file facts, the code map's weighted edges and a token budget in;
packet plans out. A file (or chunk) reviewed under several lenses is read
once, related files travel together, and every packet's estimated tokens stay
inside the budget.

A packet starts from the first unit not yet packed (in path order), takes the
other chunks of its file, then grows by the code map: at each step the unit
most tied to what the packet holds, each edge's weight (the references behind
it) divided by the geometric mean of the two files' total weights, so that a
file everything uses (a hub) does not pull unrelated files together. Strong
ties come first, then the rest of the seed's folder (a Go or Java package, a
Django app's modules), then weaker ties within the seed's top-level folder,
then its nearest units; units of other top-level folders join only through a
strong tie. Sharing a folder counts as a tie (``FOLDER_TIE``), so a feature's
parts follow one of them into its packet.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, overload

from audit_mcp.engine.languages import chars_per_token
from audit_mcp.engine.lenses import RISK_LENSES
from audit_mcp.engine.packet_ties import STRONG_TIE, Builder, WeightedEdge, ties
from audit_mcp.store.records import Cell, FileRow

TOKENS_PER_TASK = 700  # the reviewer's notes and answer for one (unit, lens) task


@dataclass(frozen=True)
class Unit:
    """One file or line-range chunk, with every lens it is reviewed under in this run."""

    path: str
    start_line: int
    end_line: int
    cells: Sequence[Cell]
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
    return read_tokens((row.language, row.size, row.line_count), start, end)


def read_tokens(facts: tuple[str, int, int], start: int, end: int) -> int:
    """The tokens of reading lines ``start``-``end`` of a file of (language, size in bytes, lines)."""
    language, size, lines = facts
    share = (end - start + 1) / max(1, lines)
    return max(1, int(size * min(1.0, share) / chars_per_token(language)) + 1)


def queued_tokens(unit: Placed, files: Mapping[str, FileRow]) -> int:
    """The tokens of reading a unit of the queue, from its file's facts when it carries them."""
    facts = unit.facts
    if facts is None:
        return unit_tokens(files[unit.path], unit.start_line, unit.end_line)
    return read_tokens(facts, unit.start_line, unit.end_line)


class Placed(Protocol):
    """Where a unit of the queue (a file or chunk) is, and how many of its cells are pending."""

    @property
    def path(self) -> str: ...
    @property
    def start_line(self) -> int: ...
    @property
    def end_line(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def facts(self) -> tuple[str, int, int] | None:
        """The file's (language, size, lines), or None to look them up in the manifest."""
        ...


class Queued(Placed, Protocol):
    """One unit of the queue with its pending cells: ``count`` of them, built by ``cells()`` (by lens) only for
    a unit that is packed."""

    def cells(self) -> Sequence[Cell]: ...
    def lenses(self) -> Sequence[str]:
        """The lens of each of ``cells()``, in that order, without building them."""
        ...


class Group:
    """Cells of one unit, already built: a ``Queued`` for cells given as a list."""

    __slots__ = ("_cells", "count", "end_line", "path", "start_line")
    facts = None

    def __init__(self, path: str, start_line: int, end_line: int, cells: list[Cell]) -> None:
        self.path, self.start_line, self.end_line = path, start_line, end_line
        self._cells = cells
        self.count = len(cells)

    def cells(self) -> list[Cell]:
        return self._cells

    def lenses(self) -> list[str]:
        return [c.lens for c in self._cells]


class UnitCells(Sequence[Cell]):
    """The cells of a packed unit (or of the part of its lenses a packet takes): counted and named by lens at
    once, built on first use. Dispatch and the prompts read them; a forecast only counts them."""

    __slots__ = ("_begin", "_built", "_end", "_queued")

    def __init__(self, queued: Queued, begin: int, end: int) -> None:
        self._queued, self._begin, self._end = queued, begin, end
        self._built: tuple[Cell, ...] | None = None

    def _cells(self) -> tuple[Cell, ...]:
        if self._built is None:
            self._built = tuple(self._queued.cells()[self._begin : self._end])
        return self._built

    def lenses(self) -> Sequence[str]:
        return self._queued.lenses()[self._begin : self._end]

    def __len__(self) -> int:
        return self._end - self._begin

    @overload
    def __getitem__(self, index: int) -> Cell: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Cell]: ...
    def __getitem__(self, index: int | slice) -> Cell | Sequence[Cell]:
        return self._cells()[index]

    def __iter__(self) -> Iterator[Cell]:
        return iter(self._cells())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return self._cells() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._cells())

    def __repr__(self) -> str:
        return repr(self._cells())


def _lenses(cells: Sequence[Cell]) -> Sequence[str]:
    return cells.lenses() if isinstance(cells, UnitCells) else [c.lens for c in cells]


def group_cells(cells: Iterable[Cell]) -> list[Group]:
    """``cells`` by unit, in path order, each unit's by lens."""
    grouped: dict[tuple[str, int, int], list[Cell]] = defaultdict(list)
    for cell in cells:
        grouped[(cell.path, cell.start_line, cell.end_line)].append(cell)
    out = []
    for (path, start, end), group in sorted(grouped.items()):
        group.sort(key=lambda c: c.lens)
        out.append(Group(path, start, end, group))
    return out


class _Slot:
    """A unit, or the part of its lenses that fits one packet, before its cells are built."""

    __slots__ = ("begin", "count", "end", "path", "queued", "tokens")

    def __init__(self, queued: Queued, begin: int, end: int, tokens: int) -> None:
        self.path, self.queued, self.begin, self.end, self.tokens = queued.path, queued, begin, end, tokens
        self.count = end - begin

    def unit(self) -> Unit:
        q = self.queued
        return Unit(q.path, q.start_line, q.end_line, UnitCells(q, self.begin, self.end), self.tokens)


def _slots(queue: Sequence[Queued], files: Mapping[str, FileRow], room: int) -> list[_Slot]:
    slots = []
    for q in sorted(queue, key=lambda q: (q.path, q.start_line, q.end_line)):
        read = queued_tokens(q, files)
        # All lenses of a file share one read, unless that does not fit: then the lenses are split up.
        per_unit = max(1, (room - read) // TOKENS_PER_TASK)
        for i in range(0, q.count, per_unit):
            n = min(per_unit, q.count - i)
            slots.append(_Slot(q, i, i + n, read + TOKENS_PER_TASK * n))
    return slots


def _tier(units: Sequence[Unit], tokens: int, budget: int) -> tuple[str, str]:
    lenses = {lens for u in units for lens in _lenses(u.cells)}
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
    edges: Sequence[WeightedEdge],
    *,
    budget: int,
    prefix_tokens: int,
    limit: int | None = None,
) -> list[PacketPlan]:
    """Group ``cells`` into packets (``pack_units``)."""
    return pack_units(group_cells(cells), files, edges, budget=budget, prefix_tokens=prefix_tokens, limit=limit)


def pack_units(
    queue: Sequence[Queued],
    files: Mapping[str, FileRow],
    edges: Sequence[WeightedEdge],
    *,
    budget: int,
    prefix_tokens: int,
    limit: int | None = None,
) -> list[PacketPlan]:
    """Pack the queue's units into packets whose estimate (prompt prefix included) fits ``budget``; with
    ``limit``, the first ``limit`` of them only (each packet is filled before the next starts, so they are the
    same). Cells are built only for the units packed.

    A single unit bigger than the budget still gets a packet of its own (the
    caller chunks files, so this only happens with tiny budgets) and is marked
    ``deep``.
    """
    room = max(1, budget - prefix_tokens)
    units = _slots(queue, files, room)
    by_path: dict[str, list[int]] = defaultdict(list)
    for i, unit in enumerate(units):
        by_path[unit.path].append(i)
    tied = ties(edges)
    folders = [posixpath.dirname(u.path) for u in units]  # read at every step of the scans below
    siblings: dict[str, list[str]] = defaultdict(list)  # each folder's files, in path order
    for unit, folder in zip(units, folders, strict=True):
        if not siblings[folder] or siblings[folder][-1] != unit.path:
            siblings[folder].append(unit.path)
    tops = [folder.split("/", 1)[0] if folder else "" for folder in folders]
    tokens = [u.tokens for u in units]
    count = len(units)
    assigned = [False] * len(units)
    plans: list[PacketPlan] = []
    cursor = 0
    while limit is None or len(plans) < limit:
        while cursor < len(units) and assigned[cursor]:
            cursor += 1
        if cursor >= len(units):
            break
        builder = Builder(units, assigned, tied, room, siblings)
        builder.take(cursor)
        # Chunks of one file stay together first, then the strongest ties, the seed's folder, the weaker ties.
        for i in by_path[units[cursor].path]:
            builder.offer(i)
        builder.follow(by_path, STRONG_TIE)
        seed_dir, seed_top = folders[cursor], tops[cursor]
        for nearby in (False, True):
            # Forward in path order from the seed: its folder's units, then the nearest units of its top-level
            # folder (an app, a package tree) that fit; never another top-level folder's, which only a tie in
            # the code map brings in. 64 misses end a scan; a unit past the room is a miss at once.
            scan, misses = cursor + 1, 0
            while scan < count and misses < 64:
                if not assigned[scan]:
                    wanted = folders[scan] == seed_dir or (nearby and tops[scan] == seed_top)
                    if wanted and builder.used + tokens[scan] <= room and builder.offer(scan):
                        for i in by_path[units[scan].path]:
                            builder.offer(i)
                    else:
                        misses += 1
                scan += 1
            if not nearby:
                builder.follow(by_path, 0.0, seed_top)
        chosen_units = tuple(units[i].unit() for i in sorted(builder.chosen))
        estimate = prefix_tokens + builder.used
        tier, reason = _tier(chosen_units, estimate, budget)
        if estimate > budget:
            tier, reason = "deep", f"one unit of {estimate} tokens exceeds the packet budget of {budget}"
        plans.append(PacketPlan(chosen_units, estimate, tier, reason))
    return plans
