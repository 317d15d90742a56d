"""The review queue read unit by unit: each file or chunk with its pending cells, counted before they are built.

Packing reads the head of the queue in path order and stops once the run is full; only the units it packs
need their cells. ``Tx.queue_units`` yields each unit that has a pending review cell (implied by the unit,
or a row in state pending: a requeued cell, one written after its file changed, one of an audit planned
before units existed) with the number of its pending cells; ``PendingUnit.cells()`` builds them, in queue
order, the same cells ``Tx.iter_cells`` reads.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from itertools import groupby
from typing import Any

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import Cell, CellKind, CellState
from audit_mcp.store.units import implied_cell

_ROW_COLUMNS = (
    "task_id, path, start_line, end_line, lens, state, attempts, run_id, packet_id, reason, content_hash,"
    " kind, subject, unit"
)
_PAGE = 2_000
# A unit's cells no row holds: (first task, content hash, its lens set, their numbers within the unit by lens,
# its file's (language, size, lines) or None when the manifest has no row for it).
_Implied = tuple[int, str, tuple[str, ...], list[int], tuple[str, int, int] | None]


class PendingUnit:
    """One unit of the queue: its range, how many of its cells are pending, and those cells on demand."""

    __slots__ = (
        "_cells",
        "_first",
        "_hash",
        "_ks",
        "_lenses",
        "_rows",
        "count",
        "end_line",
        "facts",
        "path",
        "start_line",
    )

    def __init__(
        self,
        path: str,
        start_line: int,
        end_line: int,
        implied: _Implied | None,
        rows: list[Cell],
        facts: tuple[str, int, int] | None = None,
    ) -> None:
        self.path, self.start_line, self.end_line = path, start_line, end_line
        if implied is not None:
            self._first, self._hash, self._lenses, self._ks, self.facts = implied
        else:
            self._first, self._hash, self._lenses, self._ks, self.facts = 0, "", (), [], facts
        self._rows = rows
        self.count = len(self._ks) + len(rows)
        self._cells: list[Cell] | None = None

    def cells(self) -> list[Cell]:
        """The unit's pending cells by lens (then task id): the order of the queue within a unit."""
        if self._cells is None:
            first, path, start, end, content_hash, lenses = (
                self._first,
                self.path,
                self.start_line,
                self.end_line,
                self._hash,
                self._lenses,
            )
            built = [implied_cell(first, k, path, start, end, lenses[k], content_hash) for k in self._ks]
            if self._rows:
                built = sorted(built + self._rows, key=lambda c: (c.lens, c.task_id))
            self._cells = built
        return self._cells

    def lenses(self) -> list[str]:
        """The lens of each of ``cells()``, in that order; built from the lens set alone when no row is merged."""
        if self._rows:
            return [c.lens for c in self.cells()]
        lenses = self._lenses
        return [lenses[k] for k in self._ks]


class QueueQueries(Queries):
    """The pending review queue, unit by unit."""

    def queue_units(self, audit_id: int) -> Generator[PendingUnit, None, None]:
        """Every unit with a pending review cell, in path order (path, then line range), read lazily."""
        rows = self._pending_rows(audit_id)
        implied = self._implied_units(audit_id)
        try:
            grouped = groupby(rows, key=lambda c: (c.path, c.start_line, c.end_line))
            row_group = next(grouped, None)
            unit = next(implied, None)
            while row_group is not None or unit is not None:
                if unit is not None and (row_group is None or unit[0] <= row_group[0]):
                    key, found = unit
                    extra: list[Cell] = []
                    if row_group is not None and row_group[0] == key:
                        extra = list(row_group[1])
                        row_group = next(grouped, None)
                    yield PendingUnit(*key, found, extra)
                    unit = next(implied, None)
                else:
                    assert row_group is not None
                    path = row_group[0][0]
                    yield PendingUnit(*row_group[0], None, list(row_group[1]), self._facts(audit_id, path))
                    row_group = next(grouped, None)
        finally:
            rows.close()
            implied.close()

    def _facts(self, audit_id: int, path: str) -> tuple[str, int, int] | None:
        row = self.conn.execute(
            "SELECT language, size, line_count FROM files WHERE audit_id = ? AND path = ?", (audit_id, path)
        ).fetchone()
        return (str(row[0]), int(row[1]), int(row[2])) if row is not None else None

    def _pending_rows(self, audit_id: int) -> Generator[Cell, None, None]:
        cursor = self.conn.execute(
            f"SELECT {_ROW_COLUMNS} FROM cells WHERE audit_id = ? AND state = ? AND kind = ?"
            " ORDER BY path, start_line, end_line, lens, task_id",
            (audit_id, CellState.PENDING, CellKind.REVIEW),
        )
        try:
            for row in _paged(cursor):
                yield Cell(*row)
        finally:
            cursor.close()

    def _implied_units(self, audit_id: int) -> Generator[tuple[tuple[str, int, int], _Implied], None, None]:
        """Each unit with a cell no row holds, in matrix (path) order: its key, and (first task, content hash,
        lenses, the numbers within the unit of those cells by lens, its file's language, size and lines)."""
        sets: dict[int, list[str]] = {}
        for index, lens in self.conn.execute(
            "SELECT lens_set, lens FROM lens_sets WHERE audit_id = ? ORDER BY lens_set, ord", (audit_id,)
        ):
            sets.setdefault(index, []).append(lens)
        if not sets:
            return
        lenses = {i: tuple(v) for i, v in sets.items()}
        order = {i: sorted(range(len(v)), key=v.__getitem__) for i, v in lenses.items()}
        held: dict[int, int] = dict(
            self.conn.execute(
                "SELECT unit, COUNT(*) FROM cells WHERE audit_id = ? AND unit IS NOT NULL GROUP BY unit", (audit_id,)
            ).fetchall()
        )
        # The units before the first one with a cell no row holds (those a dispatched run took) are not read.
        start = self.conn.execute(
            "SELECT first_task FROM units u WHERE audit_id = ? AND size > (SELECT COUNT(*) FROM cells c"
            " WHERE c.audit_id = u.audit_id AND c.unit = u.first_task) ORDER BY first_task LIMIT 1",
            (audit_id,),
        ).fetchone()
        if start is None:
            return
        units = self.conn.execute(
            "SELECT u.first_task, u.path, u.start_line, u.end_line, u.content_hash, u.lens_set, u.size,"
            " f.language, f.size, f.line_count FROM units u"
            " LEFT JOIN files f ON f.audit_id = u.audit_id AND f.path = u.path"
            " WHERE u.audit_id = ? AND u.first_task >= ? ORDER BY u.first_task",
            (audit_id, start[0]),
        )
        try:
            for first, path, begin, end, content_hash, index, size, language, file_size, lines in _paged(units):
                taken = held.get(first, 0)
                facts = (language, file_size, lines) if language is not None else None
                if not taken:
                    yield (path, begin, end), (first, content_hash, lenses[index], order[index], facts)
                elif taken < size:
                    skip = {
                        int(r[0][1:]) - first
                        for r in self.conn.execute(
                            "SELECT task_id FROM cells WHERE audit_id = ? AND unit = ?", (audit_id, first)
                        ).fetchall()
                    }
                    ks = [k for k in order[index] if k not in skip]
                    yield (path, begin, end), (first, content_hash, lenses[index], ks, facts)
        finally:
            units.close()


def _paged(cursor: Any) -> Iterator[Any]:
    while rows := cursor.fetchmany(_PAGE):
        yield from rows
