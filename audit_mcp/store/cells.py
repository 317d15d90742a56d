"""Queries on the coverage matrix: one cell per (file or chunk, lens), and context and verify cells.

A review cell still pending with nothing tried is implied by its unit (``store.units``) and has no row;
every query here answers for rows and implied cells alike.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any

from audit_mcp.store.records import Cell, CellBatch, CellKind, CellState, CellUpdate, RunCell
from audit_mcp.store.units import CELL_COLUMNS, CELL_SLOTS, UnitQueries, cell_row

_CELL_COLUMNS = (
    "task_id, path, start_line, end_line, lens, state, attempts, run_id, packet_id, reason, content_hash,"
    " kind, subject, unit"
)

_UPDATE = (
    "UPDATE cells SET state = ?, attempts = COALESCE(?, attempts), run_id = ?, packet_id = ?, reason = ?,"
    " updated_at = ? WHERE audit_id = ? AND task_id = ?"
)


# What an existing row of a cell takes from its assignment to a packet.
_ON_ASSIGN = (
    " ON CONFLICT (audit_id, task_id) DO UPDATE SET state = 'assigned', run_id = excluded.run_id,"
    " packet_id = excluded.packet_id, reason = excluded.reason, updated_at = excluded.updated_at"
)
# Where a PostgreSQL transaction stages a run's assignments (a temporary table: this session's own, emptied
# at every commit), its columns ``CELL_COLUMNS``.
_STAGE = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS assigning (audit_id BIGINT, task_id TEXT, path TEXT, start_line BIGINT,"
    " end_line BIGINT, lens TEXT, state TEXT, attempts BIGINT, run_id TEXT, packet_id TEXT, reason TEXT,"
    " content_hash TEXT, updated_at TEXT, kind TEXT, subject TEXT, unit BIGINT) ON COMMIT DELETE ROWS"
)

_UPDATE_MANY = (
    "UPDATE cells SET state = ?, attempts = COALESCE(?, attempts), run_id = ?, packet_id = ?, reason = ?,"
    " updated_at = ? WHERE audit_id = ? AND task_id IN "
)
_BATCH = 500  # task ids bound in one statement (SQLite allows 999 at least)
_Values = tuple[str, int | None, str | None, str | None, str | None]  # state, attempts, run, packet, reason


def _cell(row: Any) -> Cell:
    return Cell(
        task_id=row["task_id"],
        path=row["path"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        lens=row["lens"],
        state=row["state"],
        attempts=row["attempts"],
        run_id=row["run_id"],
        packet_id=row["packet_id"],
        reason=row["reason"],
        content_hash=row["content_hash"],
        kind=row["kind"],
        subject=row["subject"],
        unit=row["unit"],
    )


def _queue_key(cell: Cell) -> tuple[str, int, int, str, str]:
    return (cell.path, cell.start_line, cell.end_line, cell.lens, cell.task_id)


def _implied(states: Sequence[str] | None, kinds: Sequence[str] | None) -> bool:
    """Whether a query for cells in ``states`` of ``kinds`` (None: any) reaches implied cells."""
    return (states is None or CellState.PENDING in states) and (kinds is None or CellKind.REVIEW in kinds)


class CellQueries(UnitQueries):
    """Cells: inserting the matrix, reading the queue, assigning and answering cells."""

    def insert_cells(self, audit_id: int, cells: Iterable[Cell], now: str) -> None:
        """Cells that are rows only (no unit implies them): ``CELL_COLUMNS`` but the unit."""
        self.conn.executemany(
            "INSERT INTO cells (audit_id, task_id, path, start_line, end_line, lens, state, attempts,"
            " run_id, packet_id, reason, content_hash, updated_at, kind, subject)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [cell_row(audit_id, c, now, c.run_id, c.packet_id, c.state)[:-1] for c in cells],
        )

    def carry_cells(
        self, audit_id: int, carried: Iterable[tuple[str, str, str | None, str | None, str]], now: str
    ) -> None:
        """Set cells (task id, state, run id, packet id, reason) carried over from an earlier audit."""
        carried = list(carried)
        self.materialize(audit_id, [c[0] for c in carried], now)
        self.conn.executemany(
            "UPDATE cells SET state = ?, run_id = ?, packet_id = ?, reason = ?, updated_at = ?"
            " WHERE audit_id = ? AND task_id = ?",
            [
                (state, run_id, packet_id, reason, now, audit_id, task_id)
                for task_id, state, run_id, packet_id, reason in carried
            ],
        )

    def cells(
        self, audit_id: int, states: Sequence[str] | None = None, *, kinds: Sequence[str] | None = None
    ) -> list[Cell]:
        sql = f"SELECT {_CELL_COLUMNS} FROM cells WHERE audit_id = ?"
        args: list[Any] = [audit_id]
        if states is not None:
            sql += f" AND state IN ({','.join('?' for _ in states)})"
            args.extend(states)
        if kinds is not None:
            sql += f" AND kind IN ({','.join('?' for _ in kinds)})"
            args.extend(kinds)
        sql += " ORDER BY path, start_line, lens"
        # Positional construction: this runs over every cell of large repositories.
        cells = [Cell(*r) for r in self.conn.execute(sql, args)]
        if _implied(states, kinds):
            implied = list(self.iter_implicit_cells(audit_id))
            if implied:
                cells += implied
                cells.sort(key=lambda c: (c.path, c.start_line, c.lens))
        return cells

    def iter_cells(self, audit_id: int, state: str, kind: str = CellKind.REVIEW) -> Generator[Cell, None, None]:
        """Cells of one kind in one state, unit by unit in path order, read lazily (the caller may stop early)."""
        rows = self._iter_rows(audit_id, state, kind)
        if not _implied([state], [kind]):
            yield from rows
            return
        implied = self.iter_implicit_cells(audit_id)
        try:
            yield from heapq.merge(rows, implied, key=_queue_key)
        finally:
            rows.close()
            implied.close()

    def _iter_rows(self, audit_id: int, state: str, kind: str) -> Generator[Cell, None, None]:
        cursor = self.conn.execute(
            f"SELECT {_CELL_COLUMNS} FROM cells WHERE audit_id = ? AND state = ? AND kind = ?"
            " ORDER BY path, start_line, end_line, lens, task_id",
            (audit_id, state, kind),
        )
        try:
            while rows := cursor.fetchmany(2_000):
                yield from (Cell(*r) for r in rows)
        finally:
            cursor.close()

    def cells_by_id(self, audit_id: int, task_ids: Sequence[str]) -> dict[str, Cell]:
        found: dict[str, Cell] = {}
        for i in range(0, len(task_ids), 500):
            batch = task_ids[i : i + 500]
            rows = self.conn.execute(
                f"SELECT {_CELL_COLUMNS} FROM cells WHERE audit_id = ? AND task_id IN ({','.join('?' for _ in batch)})",
                [audit_id, *batch],
            )
            for r in rows:
                found[r[0]] = Cell(*r)
        missing = [t for t in task_ids if t not in found]
        if missing:
            found.update(self.implicit_cells_by_id(audit_id, missing))
        return found

    def update_cell(
        self,
        audit_id: int,
        task_id: str,
        *,
        state: str,
        now: str,
        attempts: int | None = None,
        run_id: str | None = None,
        packet_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        args = (state, attempts, run_id, packet_id, reason, now, audit_id, task_id)
        if self.conn.execute(_UPDATE, args).rowcount == 0 and self.materialize(audit_id, [task_id], now):
            self.conn.execute(_UPDATE, args)

    def run_cells(self, audit_id: int, task_ids: Sequence[str]) -> dict[str, RunCell]:
        """What merging needs of these cells (a run's: each has its row), by task id."""
        found: dict[str, RunCell] = {}
        for i in range(0, len(task_ids), _BATCH):
            batch = task_ids[i : i + _BATCH]
            rows = self.conn.execute(
                "SELECT task_id, path, lens, attempts, kind, subject FROM cells WHERE audit_id = ?"
                f" AND task_id IN ({','.join('?' for _ in batch)})",
                (audit_id, *batch),
            )
            found.update((r[0], RunCell(*r)) for r in rows)
        return found

    def update_cells(
        self, audit_id: int, updates: Iterable[CellUpdate], now: str, batches: Iterable[CellBatch] = ()
    ) -> None:
        """``update_cell`` for many cells: ``batches`` (many cells, one new state each) and then ``updates``,
        the last update of a task winning. One statement for each batch of cells given the same values (a
        packet's reviewed cells share them), and again for implied cells once they have rows."""
        values: dict[str, _Values] = {}
        for batch in batches:
            values.update(dict.fromkeys(batch.task_ids, (batch.state, None, batch.run_id, batch.packet_id, None)))
        values.update((u.task_id, (u.state, u.attempts, u.run_id, u.packet_id, u.reason)) for u in updates)
        groups: dict[_Values, list[str]] = {}
        for task_id, given in values.items():
            groups.setdefault(given, []).append(task_id)
        if self._update_groups(audit_id, groups, now) == len(values):
            return  # every cell had its row (a run's cells do): the common case, with no look-up
        have = set(self.materialize(audit_id, list(values), now))
        self._update_groups(audit_id, {k: [t for t in ids if t in have] for k, ids in groups.items()}, now)

    def _update_groups(
        self,
        audit_id: int,
        groups: dict[_Values, list[str]],
        now: str,
    ) -> int:
        """Set each group's values on its cells; the number of rows changed."""
        changed = 0
        for (state, attempts, run_id, packet_id, reason), task_ids in groups.items():
            for i in range(0, len(task_ids), _BATCH):
                batch = task_ids[i : i + _BATCH]
                changed += self.conn.execute(
                    _UPDATE_MANY + f"({','.join('?' for _ in batch)})",
                    (state, attempts, run_id, packet_id, reason, now, audit_id, *batch),
                ).rowcount
        return changed

    def cells_for_path(self, audit_id: int, path: str) -> list[Cell]:
        rows = self.conn.execute(
            "SELECT * FROM cells WHERE audit_id = ? AND path = ? ORDER BY start_line, task_id", (audit_id, path)
        )
        cells = [_cell(r) for r in rows]
        implied = self.implicit_cells_for_path(audit_id, path, [c.task_id for c in cells])
        if implied:
            cells += implied
            cells.sort(key=lambda c: (c.start_line, c.task_id))
        return cells

    def reset_cell(self, audit_id: int, task_id: str, *, state: str, content_hash: str, reason: str, now: str) -> None:
        """Back to ``state`` with a fresh retry budget, for content that changed under a review."""
        self.materialize(audit_id, [task_id], now)
        self.conn.execute(
            "UPDATE cells SET state = ?, attempts = 0, run_id = NULL, packet_id = NULL, reason = ?, content_hash = ?,"
            " updated_at = ? WHERE audit_id = ? AND task_id = ?",
            (state, reason, content_hash, now, audit_id, task_id),
        )

    def delete_cells(self, audit_id: int, task_ids: Sequence[str]) -> None:
        self.drop_units(audit_id, task_ids)
        self.conn.executemany("DELETE FROM cells WHERE audit_id = ? AND task_id = ?", [(audit_id, t) for t in task_ids])

    def max_task_number(self, audit_id: int, kind: str = CellKind.REVIEW) -> int:
        """The highest number among the task ids of one kind (``T00012`` is 12, ``V0003`` is 3)."""
        row = self.conn.execute(
            "SELECT MAX(CAST(SUBSTR(task_id, 2) AS INTEGER)) FROM cells WHERE audit_id = ? AND kind = ?",
            (audit_id, kind),
        ).fetchone()
        highest = int(row[0] or 0)
        return max(highest, self.max_unit_task(audit_id)) if kind == CellKind.REVIEW else highest

    def assign_cells(self, audit_id: int, run_id: str, packet_id: str, cells: Iterable[Cell], now: str) -> None:
        """Assign cells to a packet: an implied cell gets its row here, in the same statement."""
        self.assign_run_cells(audit_id, run_id, {packet_id: cells}, now)

    def assign_run_cells(self, audit_id: int, run_id: str, by_packet: Mapping[str, Iterable[Cell]], now: str) -> None:
        """Assign each packet of run ``run_id`` its cells, in one statement for the whole run."""
        assigned = CellState.ASSIGNED.value
        rows = [
            cell_row(audit_id, c, now, run_id, packet_id, assigned)
            for packet_id, cells in by_packet.items()
            for c in cells
        ]
        if self.dialect == "postgresql" and len(rows) > 1:
            # PostgreSQL sends each row of an upsert as a statement; staged, the rows go in one COPY stream
            # and the upsert is one statement over them (the task ids are unique: each cell is in one packet).
            self.conn.execute(_STAGE)
            self.conn.execute("DELETE FROM assigning")
            self.conn.executemany(f"INSERT INTO assigning ({CELL_COLUMNS}) VALUES ({CELL_SLOTS})", rows)
            self.conn.execute(f"INSERT INTO cells ({CELL_COLUMNS}) SELECT {CELL_COLUMNS} FROM assigning" + _ON_ASSIGN)
            return
        self.conn.executemany(f"INSERT INTO cells ({CELL_COLUMNS}) VALUES ({CELL_SLOTS})" + _ON_ASSIGN, rows)

    def task_ids_starting(self, audit_id: int, prefix: str, limit: int) -> list[str]:
        """The audit's task ids that start with ``prefix``, in order, at most ``limit``."""
        rows = self.conn.execute(
            "SELECT task_id FROM cells WHERE audit_id = ? AND SUBSTR(task_id, 1, ?) = ? ORDER BY task_id LIMIT ?",
            (audit_id, len(prefix), prefix, limit),
        )
        found = [r[0] for r in rows]
        implied = self.implied_task_ids(audit_id, prefix)
        return sorted({*found, *implied})[:limit] if implied else found

    def cell_counts(self, audit_id: int) -> dict[str, int]:
        rows = self.conn.execute("SELECT state, COUNT(*) FROM cells WHERE audit_id = ? GROUP BY state", (audit_id,))
        counts = {r[0]: r[1] for r in rows}
        return _plus_implied(counts, self.implied_count(audit_id))

    def cell_counts_by_lens(self, audit_id: int) -> dict[str, dict[str, int]]:
        """Review cells by lens and state (context and verify cells are counted by ``cell_counts_by_kind``)."""
        rows = self.conn.execute(
            "SELECT lens, state, COUNT(*) FROM cells WHERE audit_id = ? AND kind = ? GROUP BY lens, state",
            (audit_id, CellKind.REVIEW.value),
        )
        out: dict[str, dict[str, int]] = {}
        for lens, state, n in rows:
            out.setdefault(lens, {})[state] = n
        for lens, n in self.implied_count_by_lens(audit_id).items():
            out[lens] = _plus_implied(out.get(lens, {}), n)
        return out

    def cell_counts_by_kind(self, audit_id: int) -> dict[str, dict[str, int]]:
        """Every cell by kind (context, review, verify) and state."""
        rows = self.conn.execute(
            "SELECT kind, state, COUNT(*) FROM cells WHERE audit_id = ? GROUP BY kind, state", (audit_id,)
        )
        out: dict[str, dict[str, int]] = {}
        for kind, state, n in rows:
            out.setdefault(kind, {})[state] = n
        implied = self.implied_count(audit_id)
        if implied:
            out[CellKind.REVIEW.value] = _plus_implied(out.get(CellKind.REVIEW.value, {}), implied)
        return out


def _plus_implied(counts: dict[str, int], implied: int) -> dict[str, int]:
    """``counts`` by state with ``implied`` more pending cells."""
    if implied:
        counts[CellState.PENDING.value] = counts.get(CellState.PENDING.value, 0) + implied
    return counts
