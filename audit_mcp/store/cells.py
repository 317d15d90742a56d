"""Queries on the coverage matrix: one row per (file or chunk, lens) cell."""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence
from typing import Any

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import Cell, CellKind, CellUpdate, Matrix

_CELL_COLUMNS = (
    "task_id, path, start_line, end_line, lens, state, attempts, run_id, packet_id, reason, content_hash, kind, subject"
)


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
    )


class CellQueries(Queries):
    """Cells: inserting the matrix, reading the queue, assigning and answering cells."""

    def insert_cells(self, audit_id: int, cells: Iterable[Cell], now: str) -> None:
        self.conn.executemany(
            "INSERT INTO cells (audit_id, task_id, path, start_line, end_line, lens, state, attempts,"
            " run_id, packet_id, reason, content_hash, updated_at, kind, subject)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    audit_id,
                    c.task_id,
                    c.path,
                    c.start_line,
                    c.end_line,
                    c.lens,
                    c.state,
                    c.attempts,
                    c.run_id,
                    c.packet_id,
                    c.reason,
                    c.content_hash,
                    now,
                    c.kind,
                    c.subject,
                )
                for c in cells
            ],
        )

    def insert_matrix(self, audit_id: int, matrix: Matrix, now: str) -> int:
        """Insert every cell of ``matrix`` as pending, numbered as ``coverage.build_cells`` numbers them.

        The (unit, lens) pairs are expanded inside SQLite: on large repositories this is several times
        faster than building and binding one row per cell. Returns how many cells were inserted.
        """
        self.conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS matrix_units (seq INTEGER PRIMARY KEY, path TEXT,"
            " start_line INTEGER, end_line INTEGER, content_hash TEXT, lens_set INTEGER)"
        )
        self.conn.execute(
            "CREATE TEMP TABLE IF NOT EXISTS matrix_lenses (lens_set INTEGER, ord INTEGER, lens TEXT,"
            " PRIMARY KEY (lens_set, ord))"
        )
        try:
            self.conn.execute("DELETE FROM matrix_units")
            self.conn.execute("DELETE FROM matrix_lenses")
            self.conn.executemany(
                "INSERT INTO matrix_units (path, start_line, end_line, content_hash, lens_set) VALUES (?, ?, ?, ?, ?)",
                matrix.units,
            )
            self.conn.executemany(
                "INSERT INTO matrix_lenses (lens_set, ord, lens) VALUES (?, ?, ?)",
                [(i, n, lens) for i, lenses in enumerate(matrix.lens_sets) for n, lens in enumerate(lenses)],
            )
            cursor = self.conn.execute(
                "INSERT INTO cells (audit_id, task_id, path, start_line, end_line, lens, state, attempts, run_id,"
                " packet_id, reason, content_hash, updated_at)"
                # T00001 ... T99999, then T100000: five digits at least, written the same in both dialects.
                " SELECT ?, CASE WHEN n < 100000 THEN 'T' || SUBSTR(CAST(100000 + n AS TEXT), 2)"
                " ELSE 'T' || CAST(n AS TEXT) END, path, start_line, end_line, lens, 'pending', 0, NULL, NULL, NULL,"
                " content_hash, ? FROM (SELECT ROW_NUMBER() OVER (ORDER BY u.seq, l.ord) AS n, u.seq AS useq,"
                " l.ord AS lord, u.path AS path, u.start_line AS start_line, u.end_line AS end_line, l.lens AS lens,"
                " u.content_hash AS content_hash FROM matrix_units u JOIN matrix_lenses l ON l.lens_set = u.lens_set)"
                " numbered ORDER BY useq, lord",
                (audit_id, now),
            )
            return cursor.rowcount
        finally:
            self.conn.execute("DELETE FROM matrix_units")
            self.conn.execute("DELETE FROM matrix_lenses")

    def carry_cells(
        self, audit_id: int, carried: Iterable[tuple[str, str, str | None, str | None, str]], now: str
    ) -> None:
        """Set cells (task id, state, run id, packet id, reason) carried over from an earlier audit."""
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
        return [Cell(*r) for r in self.conn.execute(sql, args)]

    def iter_cells(self, audit_id: int, state: str, kind: str = CellKind.REVIEW) -> Generator[Cell, None, None]:
        """Cells of one kind in one state, unit by unit in path order, read lazily (the caller may stop early)."""
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
                f"SELECT * FROM cells WHERE audit_id = ? AND task_id IN ({','.join('?' for _ in batch)})",
                [audit_id, *batch],
            )
            for r in rows:
                found[r["task_id"]] = _cell(r)
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
        self.conn.execute(
            "UPDATE cells SET state = ?, attempts = COALESCE(?, attempts), run_id = ?, packet_id = ?,"
            " reason = ?, updated_at = ? WHERE audit_id = ? AND task_id = ?",
            (state, attempts, run_id, packet_id, reason, now, audit_id, task_id),
        )

    def run_cells(self, audit_id: int, run_id: str) -> dict[str, Cell]:
        """The cells of every packet of a run, by task id, in one query."""
        columns = ", ".join(f"c.{c.strip()}" for c in _CELL_COLUMNS.split(","))
        rows = self.conn.execute(
            f"SELECT {columns} FROM packets p JOIN packet_tasks pt ON pt.packet_id = p.packet_id"
            " JOIN cells c ON c.audit_id = ? AND c.task_id = pt.task_id WHERE p.run_id = ?",
            (audit_id, run_id),
        )
        return {r[0]: Cell(*r) for r in rows}

    def update_cells(self, audit_id: int, updates: Iterable[CellUpdate], now: str) -> None:
        """``update_cell`` for many cells, in one statement."""
        self.conn.executemany(
            "UPDATE cells SET state = ?, attempts = COALESCE(?, attempts), run_id = ?, packet_id = ?,"
            " reason = ?, updated_at = ? WHERE audit_id = ? AND task_id = ?",
            [(u.state, u.attempts, u.run_id, u.packet_id, u.reason, now, audit_id, u.task_id) for u in updates],
        )

    def cells_for_path(self, audit_id: int, path: str) -> list[Cell]:
        rows = self.conn.execute(
            "SELECT * FROM cells WHERE audit_id = ? AND path = ? ORDER BY start_line, task_id", (audit_id, path)
        )
        return [_cell(r) for r in rows]

    def reset_cell(self, audit_id: int, task_id: str, *, state: str, content_hash: str, reason: str, now: str) -> None:
        """Back to ``state`` with a fresh retry budget, for content that changed under a review."""
        self.conn.execute(
            "UPDATE cells SET state = ?, attempts = 0, run_id = NULL, packet_id = NULL, reason = ?, content_hash = ?,"
            " updated_at = ? WHERE audit_id = ? AND task_id = ?",
            (state, reason, content_hash, now, audit_id, task_id),
        )

    def delete_cells(self, audit_id: int, task_ids: Sequence[str]) -> None:
        self.conn.executemany("DELETE FROM cells WHERE audit_id = ? AND task_id = ?", [(audit_id, t) for t in task_ids])

    def max_task_number(self, audit_id: int, kind: str = CellKind.REVIEW) -> int:
        """The highest number among the task ids of one kind (``T00012`` is 12, ``V0003`` is 3)."""
        row = self.conn.execute(
            "SELECT MAX(CAST(SUBSTR(task_id, 2) AS INTEGER)) FROM cells WHERE audit_id = ? AND kind = ?",
            (audit_id, kind),
        ).fetchone()
        return int(row[0] or 0)

    def assign_cells(self, audit_id: int, run_id: str, packet_id: str, cells: Iterable[Cell], now: str) -> None:
        self.conn.executemany(
            "UPDATE cells SET state = 'assigned', run_id = ?, packet_id = ?, reason = ?, updated_at = ?"
            " WHERE audit_id = ? AND task_id = ?",
            [(run_id, packet_id, c.reason, now, audit_id, c.task_id) for c in cells],
        )

    def task_ids_starting(self, audit_id: int, prefix: str, limit: int) -> list[str]:
        """The audit's task ids that start with ``prefix``, in order, at most ``limit``."""
        rows = self.conn.execute(
            "SELECT task_id FROM cells WHERE audit_id = ? AND SUBSTR(task_id, 1, ?) = ? ORDER BY task_id LIMIT ?",
            (audit_id, len(prefix), prefix, limit),
        )
        return [r[0] for r in rows]

    def cell_counts(self, audit_id: int) -> dict[str, int]:
        rows = self.conn.execute("SELECT state, COUNT(*) FROM cells WHERE audit_id = ? GROUP BY state", (audit_id,))
        return {r[0]: r[1] for r in rows}

    def cell_counts_by_lens(self, audit_id: int) -> dict[str, dict[str, int]]:
        """Review cells by lens and state (context and verify cells are counted by ``cell_counts_by_kind``)."""
        rows = self.conn.execute(
            "SELECT lens, state, COUNT(*) FROM cells WHERE audit_id = ? AND kind = ? GROUP BY lens, state",
            (audit_id, CellKind.REVIEW.value),
        )
        out: dict[str, dict[str, int]] = {}
        for lens, state, n in rows:
            out.setdefault(lens, {})[state] = n
        return out

    def cell_counts_by_kind(self, audit_id: int) -> dict[str, dict[str, int]]:
        """Every cell by kind (context, review, verify) and state."""
        rows = self.conn.execute(
            "SELECT kind, state, COUNT(*) FROM cells WHERE audit_id = ? GROUP BY kind, state", (audit_id,)
        )
        out: dict[str, dict[str, int]] = {}
        for kind, state, n in rows:
            out.setdefault(kind, {})[state] = n
        return out

    # runs and packets -----------------------------------------------------------
