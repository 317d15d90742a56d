"""Queries on audits, their manifest files and the import edges between them."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from audit_mcp.store.queries import Connection, Queries
from audit_mcp.store.records import AuditRow, FileRow

_FILE_COLUMNS = "path, language, size, line_count, sha256, scope, skip_reason, kind, stat, cuts"


class AuditQueries(Queries):
    """Audits (one per start), their files, and import edges."""

    def current_audit(self) -> AuditRow | None:
        row = self.conn.execute("SELECT * FROM audits ORDER BY audit_id DESC LIMIT 1").fetchone()
        return None if row is None else self._audit(row)

    def audit(self, audit_id: int) -> AuditRow | None:
        row = self.conn.execute("SELECT * FROM audits WHERE audit_id = ?", (audit_id,)).fetchone()
        return None if row is None else self._audit(row)

    def latest_finished_audit(self) -> AuditRow | None:
        """The latest audit whose report was written (synthesized), abandoned or not after it."""
        row = self.conn.execute(
            "SELECT * FROM audits WHERE synthesized_at IS NOT NULL ORDER BY audit_id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else self._audit(row)

    def audit_ids(self) -> list[int]:
        return [r[0] for r in self.conn.execute("SELECT audit_id FROM audits ORDER BY audit_id")]

    def previous_audit(self, audit_id: int) -> AuditRow | None:
        """The latest finished audit before ``audit_id``: the baseline a new audit is compared with."""
        row = self.conn.execute(
            "SELECT * FROM audits WHERE audit_id < ? AND synthesized_at IS NOT NULL ORDER BY audit_id DESC LIMIT 1",
            (audit_id,),
        ).fetchone()
        return None if row is None else self._audit(row)

    @staticmethod
    def _audit(row: Any) -> AuditRow:
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
            abandoned_at=row["abandoned_at"],
            abandon_reason=row["abandon_reason"],
        )

    def create_audit(
        self, *, now: str, root: str, git_head: str | None, git_dirty: bool, digest: str, lenses: Sequence[str]
    ) -> int:
        row = self.conn.execute(
            "INSERT INTO audits (created_at, root, git_head, git_dirty, manifest_digest, lenses, host_caps)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING audit_id",
            (now, root, git_head, int(git_dirty), digest, json.dumps(list(lenses)), "{}"),
        ).fetchone()
        return int(row[0])

    def previous_audit_id(self, audit_id: int) -> int | None:
        """The latest audit before ``audit_id`` that was not abandoned: what a new audit carries forward."""
        row = self.conn.execute(
            "SELECT MAX(audit_id) FROM audits WHERE audit_id < ? AND abandoned_at IS NULL", (audit_id,)
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def set_host_caps(self, audit_id: int, caps: dict[str, Any]) -> None:
        self.conn.execute(
            "UPDATE audits SET host_caps = ? WHERE audit_id = ?", (json.dumps(caps, sort_keys=True), audit_id)
        )

    def set_blocker(self, audit_id: int, blocker: str | None) -> None:
        self.conn.execute("UPDATE audits SET blocker = ? WHERE audit_id = ?", (blocker, audit_id))

    def set_synthesized(self, audit_id: int, at: str | None) -> None:
        self.conn.execute("UPDATE audits SET synthesized_at = ? WHERE audit_id = ?", (at, audit_id))

    def abandon_audit(self, audit_id: int, now: str, reason: str) -> None:
        self.conn.execute(
            "UPDATE audits SET abandoned_at = ?, abandon_reason = ? WHERE audit_id = ?", (now, reason, audit_id)
        )

    # files and edges ----------------------------------------------------------
    def insert_files(self, audit_id: int, rows: Iterable[FileRow]) -> None:
        self.conn.executemany(
            "INSERT INTO files (audit_id, path, language, size, line_count, sha256, scope, skip_reason, kind, stat,"
            " cuts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    audit_id,
                    r.path,
                    r.language,
                    r.size,
                    r.line_count,
                    r.sha256,
                    r.scope,
                    r.skip_reason,
                    r.kind,
                    r.stat,
                    r.cuts,
                )
                for r in rows
            ],
        )

    def files(self, audit_id: int, *, scope: str | None = None) -> list[FileRow]:
        """The manifest in path order: every file, or those of one ``scope`` (``review``, ``skipped``)."""
        rows = self.conn.execute(
            f"SELECT {_FILE_COLUMNS} FROM files WHERE audit_id = ?"
            + (" AND scope = ?" if scope is not None else "")
            + " ORDER BY path",
            (audit_id, scope) if scope is not None else (audit_id,),
        )
        # Positional construction: this runs over every file of large repositories.
        return [FileRow(*r) for r in rows]

    def file(self, audit_id: int, path: str) -> FileRow | None:
        row = self.conn.execute("SELECT * FROM files WHERE audit_id = ? AND path = ?", (audit_id, path)).fetchone()
        if row is None:
            return None
        return FileRow(
            row["path"],
            row["language"],
            row["size"],
            row["line_count"],
            row["sha256"],
            row["scope"],
            row["skip_reason"],
            row["kind"],
            row["stat"],
            row["cuts"],
        )

    def update_file(self, audit_id: int, r: FileRow) -> None:
        self.conn.execute(
            "UPDATE files SET language = ?, size = ?, line_count = ?, sha256 = ?, scope = ?, skip_reason = ?,"
            " kind = ?, stat = ?, cuts = ? WHERE audit_id = ? AND path = ?",
            (
                r.language,
                r.size,
                r.line_count,
                r.sha256,
                r.scope,
                r.skip_reason,
                r.kind,
                r.stat,
                r.cuts,
                audit_id,
                r.path,
            ),
        )

    def files_in_order(self, audit_id: int) -> FileWindow:
        """The manifest rows by path, read a page at a time in path order as they are asked for: a reader
        walking the queue (which is in path order) reads only the files it reaches."""
        return FileWindow(self.conn, audit_id)

    def files_at(self, audit_id: int, paths: Iterable[str]) -> list[FileRow]:
        """The manifest rows of these paths (those in the manifest), in path order."""
        wanted = sorted(set(paths))
        found: list[FileRow] = []
        for i in range(0, len(wanted), 500):
            batch = wanted[i : i + 500]
            rows = self.conn.execute(
                f"SELECT {_FILE_COLUMNS} FROM files WHERE audit_id = ? AND path IN ({','.join('?' for _ in batch)})"
                " ORDER BY path",
                (audit_id, *batch),
            )
            found += [FileRow(*r) for r in rows]
        return found

    def file_counts(self, audit_id: int) -> dict[str, int]:
        """Files of the manifest by scope (``review`` / ``skipped``)."""
        rows = self.conn.execute("SELECT scope, COUNT(*) FROM files WHERE audit_id = ? GROUP BY scope", (audit_id,))
        return {r[0]: r[1] for r in rows}

    def has_file(self, audit_id: int, path: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM files WHERE audit_id = ? AND path = ?", (audit_id, path)).fetchone()
        return row is not None

    def has_path(self, audit_id: int, path: str) -> bool:
        """Whether ``path`` is a file of the manifest or a directory holding one."""
        prefix = path.rstrip("/") + "/"
        row = self.conn.execute(
            "SELECT 1 FROM files WHERE audit_id = ? AND (path = ? OR SUBSTR(path, 1, ?) = ?) LIMIT 1",
            (audit_id, path, len(prefix), prefix),
        ).fetchone()
        return row is not None

    def insert_edges(self, audit_id: int, edges: Iterable[tuple[str, str]]) -> None:
        self.conn.executemany(
            "INSERT INTO edges (audit_id, src, dst) VALUES (?, ?, ?)", [(audit_id, s, d) for s, d in edges]
        )

    def edges_between(self, audit_id: int, paths: Collection[str]) -> list[tuple[str, str]]:
        """The import edges whose two ends are both among ``paths`` (read over their range of paths)."""
        if not paths:
            return []
        low, high = min(paths), max(paths)
        rows = self.conn.execute(
            "SELECT src, dst FROM edges WHERE audit_id = ? AND src >= ? AND src <= ? AND dst >= ? AND dst <= ?"
            " ORDER BY src, dst",
            (audit_id, low, high, low, high),
        )
        return [(r[0], r[1]) for r in rows if r[0] in paths and r[1] in paths]

    def edges_touching(self, audit_id: int, paths: Collection[str]) -> list[tuple[str, str]]:
        """The import edges with at least one end among ``paths``, in ``edges`` order."""
        if not paths:
            return []
        low, high = min(paths), max(paths)
        rows = self.conn.execute(
            "SELECT src, dst FROM edges WHERE audit_id = ? AND ((src >= ? AND src <= ?) OR (dst >= ? AND dst <= ?))"
            " ORDER BY src, dst",
            (audit_id, low, high, low, high),
        )
        return [(r[0], r[1]) for r in rows if r[0] in paths or r[1] in paths]

    def edges(self, audit_id: int) -> list[tuple[str, str]]:
        rows = self.conn.execute("SELECT src, dst FROM edges WHERE audit_id = ? ORDER BY src, dst", (audit_id,))
        return [(r[0], r[1]) for r in rows]


class FileWindow(Mapping[str, FileRow]):
    """Manifest rows looked up by path, fetched forward in pages of path order (``Tx.files_in_order``)."""

    PAGE = 1_000
    _COLUMNS = "path, language, size, line_count, sha256, scope, skip_reason, kind"

    def __init__(self, conn: Connection, audit_id: int) -> None:
        self._conn, self._audit_id = conn, audit_id
        self._rows: dict[str, FileRow] = {}
        self._last: str | None = None  # the last path of the last page read

    def __getitem__(self, path: str) -> FileRow:
        if (row := self._rows.get(path)) is not None:
            return row
        if self._last is None or path > self._last:
            page = self._conn.execute(
                f"SELECT {self._COLUMNS} FROM files WHERE audit_id = ? AND path >= ? ORDER BY path LIMIT ?",
                (self._audit_id, path, self.PAGE),
            ).fetchall()
            for r in page:
                self._rows[r[0]] = FileRow(*r)
            if page:
                self._last = page[-1][0]
        else:  # behind the window: one lookup
            found = self._conn.execute(
                f"SELECT {self._COLUMNS} FROM files WHERE audit_id = ? AND path = ?", (self._audit_id, path)
            ).fetchone()
            if found is not None:
                self._rows[path] = FileRow(*found)
        if (row := self._rows.get(path)) is None:
            raise KeyError(path)
        return row

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)
