"""The authoritative audit state: one SQLite database in the artifacts directory.

``Store`` owns connection handling; every read and write goes through a
``Tx`` (one transaction) so a crash leaves the last committed state. Writers
take the lock up front (``BEGIN IMMEDIATE``) and wait for each other, so many
processes can submit at once without losing anything.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit_mcp.findings.leads import Lead, Verdict, lead_from_json
from audit_mcp.store.migrations import MIGRATIONS

DB_FILENAME = "audit.sqlite3"


@dataclass(frozen=True)
class Cell:
    task_id: str
    path: str
    start_line: int
    end_line: int
    lens: str
    state: str
    attempts: int
    run_id: str | None
    packet_id: str | None
    reason: str | None
    content_hash: str


@dataclass(frozen=True)
class Matrix:
    """The matrix in compact form: review units in order, each with the index of its set of lenses.

    Cell ``n`` (task id ``T{n:05d}``, counted from 1) is the n-th (unit, lens) pair, units in order and
    each unit's lenses in the order of its set. ``coverage.build_cells`` expands it; the store inserts it in one
    statement.
    """

    units: list[tuple[str, int, int, str, int]]  # path, start line, end line, content hash, lens set index
    lens_sets: list[tuple[str, ...]]


@dataclass(frozen=True)
class FileRow:
    path: str
    language: str
    size: int
    line_count: int
    sha256: str
    scope: str
    skip_reason: str | None


@dataclass(frozen=True)
class AuditRow:
    audit_id: int
    created_at: str
    root: str
    git_head: str | None
    git_dirty: bool
    manifest_digest: str
    lenses: list[str]
    host_caps: dict[str, Any]
    blocker: str | None
    synthesized_at: str | None


@dataclass(frozen=True)
class RunRow:
    run_id: str
    audit_id: int
    seq: int
    kind: str
    state: str
    created_at: str
    merged_at: str | None
    wave_size: int
    plan: dict[str, Any]


@dataclass(frozen=True)
class PacketRow:
    packet_id: str
    run_id: str
    seq: int
    state: str
    estimated_tokens: int
    model_tier: str
    tier_reason: str
    prompt_path: str


class Store:
    """Opens connections to the database and applies migrations once."""

    def __init__(self, artifacts_dir: Path) -> None:
        self.path = artifacts_dir / DB_FILENAME
        artifacts_dir.mkdir(parents=True, exist_ok=True)
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout = 60000")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _migrate(self) -> None:
        conn = self._connect()
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                for statement in (s.strip() for s in sql.split(";")):
                    if statement:
                        conn.execute(statement)
                conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, datetime('now'))", (name,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def applied_migrations(self) -> list[str]:
        with self.read() as tx:
            return [row[0] for row in tx.conn.execute("SELECT name FROM migrations ORDER BY name")]

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One write transaction: committed on success, rolled back on any error."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield Tx(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A consistent read snapshot."""
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            yield Tx(conn)
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.close()


_CELL_COLUMNS = "task_id, path, start_line, end_line, lens, state, attempts, run_id, packet_id, reason, content_hash"


def _cell(row: sqlite3.Row) -> Cell:
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
    )


class Tx:
    """Typed queries inside one transaction. All of the project's SQL lives here."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    # audits -----------------------------------------------------------------
    def current_audit(self) -> AuditRow | None:
        row = self.conn.execute("SELECT * FROM audits ORDER BY audit_id DESC LIMIT 1").fetchone()
        return None if row is None else self._audit(row)

    def previous_audit(self, audit_id: int) -> AuditRow | None:
        """The latest finished audit before ``audit_id``: the baseline a new audit is compared with."""
        row = self.conn.execute(
            "SELECT * FROM audits WHERE audit_id < ? AND synthesized_at IS NOT NULL ORDER BY audit_id DESC LIMIT 1",
            (audit_id,),
        ).fetchone()
        return None if row is None else self._audit(row)

    @staticmethod
    def _audit(row: sqlite3.Row) -> AuditRow:
        return AuditRow(
            audit_id=row["audit_id"],
            created_at=row["created_at"],
            root=row["root"],
            git_head=row["git_head"],
            git_dirty=bool(row["git_dirty"]),
            manifest_digest=row["manifest_digest"],
            lenses=json.loads(row["lenses"]),
            host_caps=json.loads(row["host_caps"]),
            blocker=row["blocker"],
            synthesized_at=row["synthesized_at"],
        )

    def create_audit(
        self, *, now: str, root: str, git_head: str | None, git_dirty: bool, digest: str, lenses: Sequence[str]
    ) -> int:
        cur = self.conn.execute(
            "INSERT INTO audits (created_at, root, git_head, git_dirty, manifest_digest, lenses, host_caps)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (now, root, git_head, int(git_dirty), digest, json.dumps(list(lenses)), "{}"),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def previous_audit_id(self, audit_id: int) -> int | None:
        row = self.conn.execute("SELECT MAX(audit_id) FROM audits WHERE audit_id < ?", (audit_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def set_host_caps(self, audit_id: int, caps: dict[str, Any]) -> None:
        self.conn.execute(
            "UPDATE audits SET host_caps = ? WHERE audit_id = ?", (json.dumps(caps, sort_keys=True), audit_id)
        )

    def set_blocker(self, audit_id: int, blocker: str | None) -> None:
        self.conn.execute("UPDATE audits SET blocker = ? WHERE audit_id = ?", (blocker, audit_id))

    def set_synthesized(self, audit_id: int, at: str | None) -> None:
        self.conn.execute("UPDATE audits SET synthesized_at = ? WHERE audit_id = ?", (at, audit_id))

    # files and edges ----------------------------------------------------------
    def insert_files(self, audit_id: int, rows: Iterable[FileRow]) -> None:
        self.conn.executemany(
            "INSERT INTO files (audit_id, path, language, size, line_count, sha256, scope, skip_reason)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (audit_id, r.path, r.language, r.size, r.line_count, r.sha256, r.scope, r.skip_reason)
                for r in rows
            ],
        )

    def files(self, audit_id: int) -> list[FileRow]:
        rows = self.conn.execute(
            "SELECT path, language, size, line_count, sha256, scope, skip_reason FROM files WHERE audit_id = ?"
            " ORDER BY path", (audit_id,))
        # Positional construction: this runs over every file of large repositories.
        return [FileRow(*r) for r in rows]

    def file(self, audit_id: int, path: str) -> FileRow | None:
        row = self.conn.execute("SELECT * FROM files WHERE audit_id = ? AND path = ?", (audit_id, path)).fetchone()
        if row is None:
            return None
        return FileRow(row["path"], row["language"], row["size"], row["line_count"], row["sha256"], row["scope"],
                       row["skip_reason"])

    def update_file(self, audit_id: int, r: FileRow) -> None:
        self.conn.execute(
            "UPDATE files SET language = ?, size = ?, line_count = ?, sha256 = ?, scope = ?, skip_reason = ?"
            " WHERE audit_id = ? AND path = ?",
            (r.language, r.size, r.line_count, r.sha256, r.scope, r.skip_reason, audit_id, r.path),
        )

    def file_counts(self, audit_id: int) -> dict[str, int]:
        """Files of the manifest by scope (``review`` / ``skipped``)."""
        rows = self.conn.execute("SELECT scope, COUNT(*) FROM files WHERE audit_id = ? GROUP BY scope", (audit_id,))
        return {r[0]: r[1] for r in rows}

    def has_file(self, audit_id: int, path: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM files WHERE audit_id = ? AND path = ?", (audit_id, path)).fetchone()
        return row is not None

    def insert_edges(self, audit_id: int, edges: Iterable[tuple[str, str]]) -> None:
        self.conn.executemany(
            "INSERT INTO edges (audit_id, src, dst) VALUES (?, ?, ?)", [(audit_id, s, d) for s, d in edges]
        )

    def edges(self, audit_id: int) -> list[tuple[str, str]]:
        rows = self.conn.execute("SELECT src, dst FROM edges WHERE audit_id = ? ORDER BY src, dst", (audit_id,))
        return [(r[0], r[1]) for r in rows]

    # cells --------------------------------------------------------------------
    def insert_cells(self, audit_id: int, cells: Iterable[Cell], now: str) -> None:
        self.conn.executemany(
            "INSERT INTO cells (audit_id, task_id, path, start_line, end_line, lens, state, attempts,"
            " run_id, packet_id, reason, content_hash, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    audit_id, c.task_id, c.path, c.start_line, c.end_line, c.lens, c.state, c.attempts,
                    c.run_id, c.packet_id, c.reason, c.content_hash, now,
                )
                for c in cells
            ],
        )

    def insert_matrix(self, audit_id: int, matrix: Matrix, now: str) -> int:
        """Insert every cell of ``matrix`` as pending, numbered as ``coverage.build_cells`` numbers them.

        The (unit, lens) pairs are expanded inside SQLite: on large repositories this is several times
        faster than building and binding one row per cell. Returns how many cells were inserted.
        """
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS matrix_units (seq INTEGER PRIMARY KEY, path TEXT,"
                          " start_line INTEGER, end_line INTEGER, content_hash TEXT, lens_set INTEGER)")
        self.conn.execute("CREATE TEMP TABLE IF NOT EXISTS matrix_lenses (lens_set INTEGER, ord INTEGER, lens TEXT,"
                          " PRIMARY KEY (lens_set, ord))")
        try:
            self.conn.execute("DELETE FROM matrix_units")
            self.conn.execute("DELETE FROM matrix_lenses")
            self.conn.executemany("INSERT INTO matrix_units (path, start_line, end_line, content_hash, lens_set)"
                                  " VALUES (?, ?, ?, ?, ?)", matrix.units)
            self.conn.executemany("INSERT INTO matrix_lenses (lens_set, ord, lens) VALUES (?, ?, ?)",
                                  [(i, n, lens) for i, lenses in enumerate(matrix.lens_sets)
                                   for n, lens in enumerate(lenses)])
            cursor = self.conn.execute(
                "INSERT INTO cells (audit_id, task_id, path, start_line, end_line, lens, state, attempts, run_id,"
                " packet_id, reason, content_hash, updated_at)"
                " SELECT ?, printf('T%05d', ROW_NUMBER() OVER (ORDER BY u.seq, l.ord)), u.path, u.start_line,"
                " u.end_line, l.lens, 'pending', 0, NULL, NULL, NULL, u.content_hash, ?"
                " FROM matrix_units u JOIN matrix_lenses l ON l.lens_set = u.lens_set ORDER BY u.seq, l.ord",
                (audit_id, now),
            )
            return cursor.rowcount
        finally:
            self.conn.execute("DELETE FROM matrix_units")
            self.conn.execute("DELETE FROM matrix_lenses")

    def carry_cells(self, audit_id: int, carried: Iterable[tuple[str, str, str | None, str | None, str]],
                    now: str) -> None:
        """Set cells (task id, state, run id, packet id, reason) carried over from an earlier audit."""
        self.conn.executemany(
            "UPDATE cells SET state = ?, run_id = ?, packet_id = ?, reason = ?, updated_at = ?"
            " WHERE audit_id = ? AND task_id = ?",
            [(state, run_id, packet_id, reason, now, audit_id, task_id)
             for task_id, state, run_id, packet_id, reason in carried],
        )

    def cells(self, audit_id: int, states: Sequence[str] | None = None) -> list[Cell]:
        sql = f"SELECT {_CELL_COLUMNS} FROM cells WHERE audit_id = ?"
        args: list[Any] = [audit_id]
        if states is not None:
            sql += f" AND state IN ({','.join('?' for _ in states)})"
            args.extend(states)
        sql += " ORDER BY path, start_line, lens"
        # Positional construction: this runs over every cell of large repositories.
        return [Cell(*r) for r in self.conn.execute(sql, args)]

    def iter_cells(self, audit_id: int, state: str) -> Generator[Cell, None, None]:
        """Cells in one state, unit by unit in path order, read lazily (the caller may stop early)."""
        cursor = self.conn.execute(
            f"SELECT {_CELL_COLUMNS} FROM cells WHERE audit_id = ? AND state = ?"
            " ORDER BY path, start_line, end_line, lens",
            (audit_id, state),
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

    def max_task_number(self, audit_id: int) -> int:
        row = self.conn.execute(
            "SELECT MAX(CAST(SUBSTR(task_id, 2) AS INTEGER)) FROM cells WHERE audit_id = ?", (audit_id,)
        ).fetchone()
        return int(row[0] or 0)

    def assign_cells(self, audit_id: int, run_id: str, packet_id: str, cells: Iterable[Cell], now: str) -> None:
        self.conn.executemany(
            "UPDATE cells SET state = 'assigned', run_id = ?, packet_id = ?, reason = ?, updated_at = ?"
            " WHERE audit_id = ? AND task_id = ?",
            [(run_id, packet_id, c.reason, now, audit_id, c.task_id) for c in cells],
        )

    def cell_counts(self, audit_id: int) -> dict[str, int]:
        rows = self.conn.execute(
            "SELECT state, COUNT(*) FROM cells WHERE audit_id = ? GROUP BY state", (audit_id,)
        )
        return {r[0]: r[1] for r in rows}

    def cell_counts_by_lens(self, audit_id: int) -> dict[str, dict[str, int]]:
        rows = self.conn.execute(
            "SELECT lens, state, COUNT(*) FROM cells WHERE audit_id = ? GROUP BY lens, state", (audit_id,)
        )
        out: dict[str, dict[str, int]] = {}
        for lens, state, n in rows:
            out.setdefault(lens, {})[state] = n
        return out

    # runs and packets -----------------------------------------------------------
    # A run's plan can be megabytes on a large repository: it is read only when ``plan=True``.
    _RUN_COLUMNS = "run_id, audit_id, seq, kind, state, created_at, merged_at, wave_size"

    def runs(self, audit_id: int, *, plan: bool = True) -> list[RunRow]:
        columns = "*" if plan else self._RUN_COLUMNS
        rows = self.conn.execute(f"SELECT {columns} FROM runs WHERE audit_id = ? ORDER BY seq", (audit_id,))
        return [self._run(r) for r in rows]

    def run(self, run_id: str, *, plan: bool = True) -> RunRow | None:
        columns = "*" if plan else self._RUN_COLUMNS
        row = self.conn.execute(f"SELECT {columns} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else self._run(row)

    @staticmethod
    def _run(r: sqlite3.Row) -> RunRow:
        return RunRow(
            run_id=r["run_id"],
            audit_id=r["audit_id"],
            seq=r["seq"],
            kind=r["kind"],
            state=r["state"],
            created_at=r["created_at"],
            merged_at=r["merged_at"],
            wave_size=r["wave_size"],
            plan=json.loads(r["plan"]) if "plan" in r.keys() else {},  # noqa: SIM118
        )

    def insert_run(self, run: RunRow) -> None:
        self.conn.execute(
            "INSERT INTO runs (run_id, audit_id, seq, kind, state, created_at, merged_at, wave_size, plan)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (
                run.run_id, run.audit_id, run.seq, run.kind, run.state, run.created_at, run.merged_at,
                run.wave_size, json.dumps(run.plan, sort_keys=True),
            ),
        )

    def finish_run(self, run_id: str, now: str) -> None:
        self.conn.execute("UPDATE runs SET state = 'merged', merged_at = ? WHERE run_id = ?", (now, run_id))

    def insert_packet(self, audit_id: int, packet: PacketRow, task_ids: Sequence[str]) -> None:
        self.conn.execute(
            "INSERT INTO packets (packet_id, run_id, audit_id, seq, state, estimated_tokens, model_tier,"
            " tier_reason, prompt_path) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                packet.packet_id, packet.run_id, audit_id, packet.seq, packet.state, packet.estimated_tokens,
                packet.model_tier, packet.tier_reason, packet.prompt_path,
            ),
        )
        self.conn.executemany(
            "INSERT INTO packet_tasks (packet_id, task_id) VALUES (?, ?)",
            [(packet.packet_id, t) for t in task_ids],
        )

    def packets(self, run_id: str) -> list[PacketRow]:
        rows = self.conn.execute("SELECT * FROM packets WHERE run_id = ? ORDER BY seq", (run_id,))
        return [self._packet(r) for r in rows]

    def packet(self, packet_id: str) -> PacketRow | None:
        row = self.conn.execute("SELECT * FROM packets WHERE packet_id = ?", (packet_id,)).fetchone()
        return None if row is None else self._packet(row)

    @staticmethod
    def _packet(r: sqlite3.Row) -> PacketRow:
        return PacketRow(
            packet_id=r["packet_id"],
            run_id=r["run_id"],
            seq=r["seq"],
            state=r["state"],
            estimated_tokens=r["estimated_tokens"],
            model_tier=r["model_tier"],
            tier_reason=r["tier_reason"],
            prompt_path=r["prompt_path"],
        )

    def set_packet_state(self, packet_id: str, state: str) -> None:
        self.conn.execute("UPDATE packets SET state = ? WHERE packet_id = ?", (state, packet_id))

    def lease_packets(self, run_id: str, expires_at: str) -> None:
        self.conn.execute("UPDATE packets SET lease_expires_at = ? WHERE run_id = ?", (expires_at, run_id))

    def expired_packet_ids(self, run_id: str, now: str) -> list[str]:
        """Packets of the run whose lease has ended without an accepted submission."""
        rows = self.conn.execute(
            "SELECT packet_id FROM packets p WHERE run_id = ? AND lease_expires_at IS NOT NULL"
            " AND lease_expires_at <= ? AND NOT EXISTS (SELECT 1 FROM submissions s WHERE s.packet_id = p.packet_id)"
            " ORDER BY seq",
            (run_id, now),
        )
        return [r[0] for r in rows]

    def assigned_packets(self, audit_id: int, task_ids: Sequence[str]) -> list[str]:
        """The packets that hold any of these tasks now."""
        found: set[str] = set()
        for i in range(0, len(task_ids), 500):
            batch = task_ids[i : i + 500]
            rows = self.conn.execute(
                "SELECT DISTINCT packet_id FROM cells WHERE audit_id = ? AND state = 'assigned'"
                f" AND task_id IN ({','.join('?' for _ in batch)})",
                [audit_id, *batch],
            )
            found.update(r[0] for r in rows if r[0])
        return sorted(found)

    def packet_task_ids(self, packet_id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT task_id FROM packet_tasks WHERE packet_id = ? ORDER BY task_id", (packet_id,)
        )
        return [r[0] for r in rows]

    # submissions, findings, failures ---------------------------------------------
    def submission(self, packet_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self.conn.execute(
            "SELECT digest, payload FROM submissions WHERE packet_id = ?", (packet_id,)
        ).fetchone()
        return None if row is None else (row[0], json.loads(row[1]))

    def put_submission(self, packet_id: str, run_id: str, digest: str, payload: dict[str, Any], now: str) -> None:
        self.conn.execute("DELETE FROM submissions WHERE packet_id = ?", (packet_id,))
        self.conn.execute(
            "INSERT INTO submissions (packet_id, run_id, digest, payload, accepted_at) VALUES (?,?,?,?,?)",
            (packet_id, run_id, digest, json.dumps(payload, sort_keys=True), now),
        )

    def submitted_packet_ids(self, run_id: str) -> set[str]:
        rows = self.conn.execute("SELECT packet_id FROM submissions WHERE run_id = ?", (run_id,))
        return {r[0] for r in rows}

    def insert_finding(
        self, audit_id: int, run_id: str, packet_id: str, task_id: str, lens: str, payload: dict[str, Any]
    ) -> None:
        self.conn.execute(
            "INSERT INTO findings (audit_id, run_id, packet_id, task_id, lens, payload) VALUES (?,?,?,?,?,?)",
            (audit_id, run_id, packet_id, task_id, lens, json.dumps(payload, sort_keys=True)),
        )

    def delete_findings(self, audit_id: int, task_ids: Sequence[str]) -> int:
        """Withdraw the findings of these tasks; returns how many."""
        removed = 0
        for task_id in task_ids:
            cur = self.conn.execute("DELETE FROM findings WHERE audit_id = ? AND task_id = ?", (audit_id, task_id))
            removed += cur.rowcount
        return removed

    def findings(self, audit_id: int) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT finding_id, run_id, packet_id, task_id, lens, payload FROM findings"
            " WHERE audit_id = ? ORDER BY finding_id",
            (audit_id,),
        )
        out = []
        for r in rows:
            item = json.loads(r["payload"])
            item.update(
                finding_id=r["finding_id"], run_id=r["run_id"], packet_id=r["packet_id"],
                task_id=r["task_id"], lens=r["lens"],
            )
            out.append(item)
        return out

    def insert_failure(self, audit_id: int, run_id: str, packet_id: str, kind: str, detail: str, now: str) -> None:
        self.conn.execute(
            "INSERT INTO failures (audit_id, run_id, packet_id, kind, detail, at) VALUES (?,?,?,?,?,?)",
            (audit_id, run_id, packet_id, kind, detail, now),
        )

    def failures(self, audit_id: int) -> list[dict[str, str]]:
        rows = self.conn.execute(
            "SELECT run_id, packet_id, kind, detail, at FROM failures WHERE audit_id = ? ORDER BY failure_id",
            (audit_id,),
        )
        return [dict(r) for r in rows]

    # analyzer leads ------------------------------------------------------------------
    def insert_leads(self, audit_id: int, leads: Iterable[Lead]) -> None:
        self.conn.executemany(
            "INSERT INTO leads (audit_id, lead_id, path, start_line, payload) VALUES (?,?,?,?,?)",
            [(audit_id, x.lead_id, x.path, x.start_line, json.dumps(x.as_json(), sort_keys=True)) for x in leads],
        )

    def leads(self, audit_id: int, packet_id: str | None = None) -> list[Lead]:
        """Every lead of the audit, or those a packet carries."""
        if packet_id is None:
            rows = self.conn.execute("SELECT payload FROM leads WHERE audit_id = ? ORDER BY lead_id", (audit_id,))
        else:
            rows = self.conn.execute(
                "SELECT l.payload FROM leads l JOIN packet_leads p ON p.lead_id = l.lead_id"
                " WHERE l.audit_id = ? AND p.packet_id = ? ORDER BY l.lead_id",
                (audit_id, packet_id),
            )
        return [lead_from_json(json.loads(r[0])) for r in rows]

    def assign_leads(self, packet_id: str, lead_ids: Iterable[str]) -> None:
        self.conn.executemany("INSERT INTO packet_leads (packet_id, lead_id) VALUES (?, ?)",
                              [(packet_id, x) for x in lead_ids])

    def insert_verdict(self, audit_id: int, verdict: Verdict) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO lead_verdicts (audit_id, lead_id, packet_id, task_id, verdict, reason)"
            " VALUES (?,?,?,?,?,?)",
            (audit_id, verdict.lead_id, verdict.packet_id, verdict.task_id, verdict.verdict, verdict.reason),
        )

    def verdicts(self, audit_id: int) -> list[Verdict]:
        rows = self.conn.execute(
            "SELECT lead_id, verdict, reason, packet_id, task_id FROM lead_verdicts WHERE audit_id = ?"
            " ORDER BY lead_id, packet_id, task_id",
            (audit_id,),
        )
        return [Verdict(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    # ledger ------------------------------------------------------------------------
    def log(self, *, now: str, audit_id: int | None, actor: str, action: str, detail: str, outcome: str) -> None:
        self.conn.execute(
            "INSERT INTO ledger (at, audit_id, actor, action, detail, outcome) VALUES (?,?,?,?,?,?)",
            (now, audit_id, actor, action, detail, outcome),
        )

    def ledger(self, audit_id: int, limit: int = 50) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT at, actor, action, detail, outcome FROM ledger WHERE audit_id = ?"
            " ORDER BY entry_id DESC LIMIT ?",
            (audit_id, limit),
        )
        return [dict(r) for r in rows]
