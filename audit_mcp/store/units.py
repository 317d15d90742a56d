"""Review units and their lens sets: the pending review cells that no row holds yet.

The matrix is stored compactly: one ``units`` row per file or chunk (the number of its first cell, its
line range, content hash and lens set) and the audit's ``lens_sets``. Review cell ``first + k`` of a
unit is its k-th lens. A ``cells`` row exists for such a cell once it is assigned, answered or otherwise
changed (its ``unit`` column names the unit); until then the cell is pending with nothing tried, and
reading it means expanding its unit. Context and verify cells, cells written after a file changed, and
every cell of an audit planned before units existed are ordinary rows with no unit.
"""

from __future__ import annotations

import bisect
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import Cell, CellKind, CellState, Matrix

# Every column of a cell's row, in the order ``cell_row`` gives them.
CELL_COLUMNS = (
    "audit_id, task_id, path, start_line, end_line, lens, state, attempts, run_id, packet_id, reason, content_hash,"
    " updated_at, kind, subject, unit"
)
CELL_SLOTS = ", ".join("?" * 16)


def cell_row(
    audit_id: int, c: Cell, now: str, run_id: str | None, packet_id: str | None, state: str
) -> tuple[Any, ...]:
    """The row of ``c`` in ``CELL_COLUMNS`` order, with the run, packet and state it is written with."""
    return (
        audit_id,
        c.task_id,
        c.path,
        c.start_line,
        c.end_line,
        c.lens,
        state,
        c.attempts,
        run_id,
        packet_id,
        c.reason,
        c.content_hash,
        now,
        c.kind,
        c.subject,
        c.unit,
    )


# Enough single-unit look-ups; past this many ids one read of every unit is cheaper.
_LOOKUPS = 32
_BATCH = 500
_UNIT_COLUMNS = "first_task, path, start_line, end_line, content_hash, lens_set, size"


def task_id(number: int) -> str:
    """``T00001`` ... ``T99999``, then ``T100000``: the review task id of cell ``number``."""
    return f"T{number:05d}"


def task_number(task: str) -> int | None:
    """The number of a review task id (``T00012`` is 12); None for any other id."""
    digits = task[1:]
    if task[:1] != "T" or not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits) if task_id(int(digits)) == task else None


def implied_cell(first: int, k: int, path: str, start: int, end: int, lens: str, content_hash: str) -> Cell:
    """The k-th cell of the unit whose first cell is number ``first``, as it stands while no row holds it:
    pending, nothing tried (the queue builds these by the thousand, from rows, without a ``Unit``)."""
    return Cell(
        task_id(first + k),
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
        CellKind.REVIEW,
        None,
        first,
    )


@dataclass(frozen=True)
class Unit:
    first: int
    path: str
    start_line: int
    end_line: int
    content_hash: str
    lens_set: int
    size: int

    def cell(self, k: int, lens: str) -> Cell:
        """The unit's k-th cell as it stands while no row holds it: pending, nothing tried."""
        return implied_cell(self.first, k, self.path, self.start_line, self.end_line, lens, self.content_hash)

    def cells(self, lenses: Sequence[str], have: Iterable[str] = ()) -> list[Cell]:
        """The unit's cells that no row holds (``have``: the task ids that one does), by lens."""
        held = set(have)
        out = [self.cell(k, lens) for k, lens in enumerate(lenses) if task_id(self.first + k) not in held]
        out.sort(key=lambda c: (c.lens, c.task_id))
        return out


class UnitQueries(Queries):
    """The units of the matrix and the pending cells they imply."""

    def insert_matrix(self, audit_id: int, matrix: Matrix, now: str) -> int:
        """Store the matrix as units, numbered as ``coverage.build_cells`` numbers the cells: cell ``n`` is the
        n-th (unit, lens) pair. No cell row is written. Returns how many cells the matrix holds."""
        del now  # a pending cell has nothing to date: its row, when it gets one, carries the time
        self.conn.executemany(
            "INSERT INTO lens_sets (audit_id, lens_set, ord, lens) VALUES (?, ?, ?, ?)",
            [(audit_id, i, k, lens) for i, lenses in enumerate(matrix.lens_sets) for k, lens in enumerate(lenses)],
        )
        rows = []
        first = 1
        for path, start, end, content_hash, index in matrix.units:
            size = len(matrix.lens_sets[index])
            rows.append((audit_id, first, path, start, end, content_hash, index, size))
            first += size
        self.conn.executemany(
            f"INSERT INTO units (audit_id, {_UNIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        return first - 1

    def lens_sets(self, audit_id: int) -> dict[int, tuple[str, ...]]:
        sets: dict[int, list[str]] = {}
        for index, lens in self.conn.execute(
            "SELECT lens_set, lens FROM lens_sets WHERE audit_id = ? ORDER BY lens_set, ord", (audit_id,)
        ):
            sets.setdefault(index, []).append(lens)
        return {k: tuple(v) for k, v in sets.items()}

    def _units(self, audit_id: int, where: str = "", args: Sequence[Any] = ()) -> list[Unit]:
        rows = self.conn.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units WHERE audit_id = ?{where} ORDER BY first_task", (audit_id, *args)
        )
        return [Unit(*r) for r in rows]

    def iter_implicit_cells(self, audit_id: int) -> Generator[Cell, None, None]:
        """Every pending cell no row holds, unit by unit in matrix (path) order, read lazily."""
        sets = self.lens_sets(audit_id)
        if not sets:
            return
        # Each set's lenses by name: the order of the queue within a unit.
        order = {i: sorted(range(len(lenses)), key=lenses.__getitem__) for i, lenses in sets.items()}
        units = self.conn.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units WHERE audit_id = ? ORDER BY first_task", (audit_id,)
        )
        held = self.conn.execute(
            "SELECT unit, task_id FROM cells WHERE audit_id = ? AND unit IS NOT NULL ORDER BY unit", (audit_id,)
        )
        try:
            taken = _paged(held)
            head = next(taken, None)
            for first, path, start, end, content_hash, index, size in _paged(units):
                skip: set[int] = set()
                while head is not None and head[0] < first:
                    head = next(taken, None)
                while head is not None and head[0] == first:
                    skip.add(int(head[1][1:]) - first)
                    head = next(taken, None)
                if len(skip) >= size:
                    continue
                lenses = sets[index]
                for k in order[index]:
                    if k not in skip:
                        yield implied_cell(first, k, path, start, end, lenses[k], content_hash)
        finally:
            units.close()
            held.close()

    def review_cell_states(self, audit_id: int) -> list[tuple[str, int, int, str, str]]:
        """(path, start line, end line, lens, state) of every review cell, rows and implied alike, in no order:
        what the coverage map draws. A unit's cells are read as its place and each row's state (a pending
        cell without a row is implied), so a large matrix's cells cost no ``Cell`` and no path each."""
        kind = CellKind.REVIEW.value
        out: list[tuple[str, int, int, str, str]] = [
            (r[0], r[1], r[2], r[3], r[4])
            for r in self.conn.execute(
                "SELECT path, start_line, end_line, lens, state FROM cells WHERE audit_id = ? AND kind = ?"
                " AND unit IS NULL",
                (audit_id, kind),
            )
        ]
        held = {
            int(r[0][1:]): r[1]
            for r in self.conn.execute(
                "SELECT task_id, state FROM cells WHERE audit_id = ? AND kind = ? AND unit IS NOT NULL",
                (audit_id, kind),
            )
        }
        sets = self.lens_sets(audit_id)
        pending = CellState.PENDING.value
        for first, path, start, end, _hash, index, size in self.conn.execute(
            f"SELECT {_UNIT_COLUMNS} FROM units WHERE audit_id = ?", (audit_id,)
        ):
            lenses = sets[index]
            out += [(path, start, end, lenses[k], held.get(first + k, pending)) for k in range(size)]
        return out

    def implicit_cells_for_path(self, audit_id: int, path: str, have: Iterable[str]) -> list[Cell]:
        units = self._units(audit_id, " AND path = ?", (path,))
        if not units:
            return []
        sets = self.lens_sets(audit_id)
        held = set(have)
        return [cell for unit in units for cell in unit.cells(sets[unit.lens_set], held)]

    def units_of(self, audit_id: int, numbers: Iterable[int]) -> dict[int, Unit]:
        """The unit that holds each of ``numbers`` (review cell numbers); a number no unit holds is left out."""
        wanted = sorted(set(numbers))
        if not wanted:
            return {}
        out: dict[int, Unit] = {}
        if len(wanted) > _LOOKUPS:
            units = self._units(audit_id)
            firsts = [u.first for u in units]
            for n in wanted:
                i = bisect.bisect_right(firsts, n) - 1
                if i >= 0 and n < units[i].first + units[i].size:
                    out[n] = units[i]
            return out
        for n in wanted:
            row = self.conn.execute(
                f"SELECT {_UNIT_COLUMNS} FROM units WHERE audit_id = ? AND first_task <= ?"
                " ORDER BY first_task DESC LIMIT 1",
                (audit_id, n),
            ).fetchone()
            if row is not None and n < row[0] + row[6]:
                out[n] = Unit(*row)
        return out

    def implicit_cells_by_id(self, audit_id: int, task_ids: Iterable[str]) -> dict[str, Cell]:
        """The implied cells among ``task_ids``, which the caller knows no row holds."""
        numbers = {n: t for t in task_ids if (n := task_number(t)) is not None}
        units = self.units_of(audit_id, numbers)
        if not units:
            return {}
        sets = self.lens_sets(audit_id)
        out: dict[str, Cell] = {}
        for n, unit in units.items():
            out[numbers[n]] = unit.cell(n - unit.first, sets[unit.lens_set][n - unit.first])
        return out

    def task_ids_with_rows(self, audit_id: int, task_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(task_ids), _BATCH):
            batch = task_ids[i : i + _BATCH]
            rows = self.conn.execute(
                f"SELECT task_id FROM cells WHERE audit_id = ? AND task_id IN ({','.join('?' for _ in batch)})",
                [audit_id, *batch],
            )
            found.update(r[0] for r in rows)
        return found

    def materialize(self, audit_id: int, task_ids: Iterable[str], now: str) -> list[str]:
        """Give a row to each implied cell among ``task_ids``, as it stands (pending), before it is changed.
        Returns the task ids that got one."""
        review = [t for t in dict.fromkeys(task_ids) if task_number(t) is not None]
        if not review:
            return []
        have = self.task_ids_with_rows(audit_id, review)
        implied = self.implicit_cells_by_id(audit_id, [t for t in review if t not in have])
        self.insert_rows(audit_id, implied.values(), now)
        return list(implied)

    def insert_rows(self, audit_id: int, cells: Iterable[Cell], now: str) -> None:
        self.conn.executemany(
            f"INSERT INTO cells ({CELL_COLUMNS}) VALUES ({CELL_SLOTS})",
            [cell_row(audit_id, c, now, c.run_id, c.packet_id, c.state) for c in cells],
        )

    def drop_units(self, audit_id: int, task_ids: Iterable[str]) -> None:
        """Before ``task_ids`` are deleted: the units they fall in stop implying cells. A unit's other cells
        (kept) get rows of their own first, unchanged since the audit was planned, which no longer name it."""
        gone = set(task_ids)
        if all(task_number(t) is None for t in gone):
            return
        row = self.conn.execute("SELECT created_at FROM audits WHERE audit_id = ?", (audit_id,)).fetchone()
        now = str(row[0]) if row is not None else ""
        units = {u.first: u for u in self.units_of(audit_id, filter(None, map(task_number, gone))).values()}
        for unit in units.values():
            ids = [task_id(unit.first + k) for k in range(unit.size)]
            self.materialize(audit_id, [t for t in ids if t not in gone], now)
            self.conn.execute("UPDATE cells SET unit = NULL WHERE audit_id = ? AND unit = ?", (audit_id, unit.first))
            self.conn.execute("DELETE FROM units WHERE audit_id = ? AND first_task = ?", (audit_id, unit.first))

    def implied_count(self, audit_id: int) -> int:
        """How many cells the units imply that no row holds yet (all of them pending)."""
        total = self.conn.execute("SELECT SUM(size) FROM units WHERE audit_id = ?", (audit_id,)).fetchone()[0]
        if not total:
            return 0
        held = self.conn.execute(
            "SELECT COUNT(*) FROM cells WHERE audit_id = ? AND unit IS NOT NULL", (audit_id,)
        ).fetchone()[0]
        return int(total) - int(held)

    def implied_count_by_lens(self, audit_id: int) -> dict[str, int]:
        sets = self.lens_sets(audit_id)
        out: dict[str, int] = {}
        for index, n in self.conn.execute(
            "SELECT lens_set, COUNT(*) FROM units WHERE audit_id = ? GROUP BY lens_set", (audit_id,)
        ):
            for lens in sets[index]:
                out[lens] = out.get(lens, 0) + int(n)
        for lens, n in self.conn.execute(
            "SELECT lens, COUNT(*) FROM cells WHERE audit_id = ? AND unit IS NOT NULL GROUP BY lens", (audit_id,)
        ):
            out[lens] -= int(n)
        return {lens: n for lens, n in out.items() if n}

    def max_unit_task(self, audit_id: int) -> int:
        sql = "SELECT MAX(first_task + size - 1) FROM units WHERE audit_id = ?"
        row = self.conn.execute(sql, (audit_id,)).fetchone()
        return int(row[0] or 0)

    def implied_task_ids(self, audit_id: int, prefix: str) -> list[str]:
        """The task ids of the cells the units imply with no row yet that start with ``prefix``."""
        if prefix[:1] not in ("", "T"):
            return []
        return [c.task_id for c in self.iter_implicit_cells(audit_id) if c.task_id.startswith(prefix)]


def _paged(cursor: Any) -> Generator[Any, None, None]:
    while rows := cursor.fetchmany(2_000):
        yield from rows
