"""A small SQLite file of JSON documents by key, updated read-modify-write in one transaction.

The learned rate-limit state uses it: one document per provider+model, shared by every audit of the user
(or of a fleet), so the file lives outside any repository. Concurrent processes serialise on the write
lock and lose nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from audit_mcp.store.sqlite import connect


class KeyedDocuments:
    """Text documents by key in one SQLite file (created on first write)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path)
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS learned (key TEXT PRIMARY KEY, state TEXT NOT NULL, "
                "updated_at TEXT NOT NULL)"
            )
            yield conn
        finally:
            conn.close()

    def get(self, key: str) -> str | None:
        if not self.path.exists():
            return None
        with self._connect() as conn:
            row = conn.execute("SELECT state FROM learned WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def update(self, key: str, change: Callable[[str | None], str], now: str) -> str:
        """Replace the document at ``key`` by ``change(old)`` atomically; returns the new text."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT state FROM learned WHERE key = ?", (key,)).fetchone()
                new = change(None if row is None else str(row[0]))
                conn.execute(
                    "INSERT INTO learned (key, state, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO "
                    "UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                    (key, new, now),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return new
