"""A small SQLite file of JSON documents by key, updated read-modify-write in one transaction.

The learned rate-limit state uses it: one document per provider+model, shared by every audit of the user
(or of a fleet), so the file lives outside any repository. Concurrent processes serialise on the write
lock and lose nothing. Because every audit reads it, a document that fails its check is never served:
it is moved to the ``quarantine`` table (with why and when) and the key reads as absent.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from audit_mcp.core.errors import StateError
from audit_mcp.store.sqlite import connect

Check = Callable[[str], str | None]
"""Why a document cannot be used, or ``None`` when it can."""


class Documents(Protocol):
    """Checked documents by key: this SQLite file, or the shared PostgreSQL store's table."""

    location: str

    def get(self, key: str, check: Check, now: str) -> str | None: ...

    def update(self, key: str, change: Callable[[str | None], str], check: Check, now: str) -> str | None: ...

    def quarantined(self, key: str) -> list[tuple[str, str]]: ...


MAX_QUARANTINE_ROWS = 200


class KeyedDocuments:
    """Text documents by key in one SQLite file (created on first write)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.location = str(path)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise StateError(f"cannot open {self.path}: {exc}") from exc
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS learned (key TEXT PRIMARY KEY, state TEXT NOT NULL, "
                "updated_at TEXT NOT NULL)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS quarantine (entry_id INTEGER PRIMARY KEY, key TEXT NOT NULL, "
                "state TEXT NOT NULL, reason TEXT NOT NULL, at TEXT NOT NULL)"
            )
            yield conn
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{self.path} is not a usable SQLite database ({exc}); move it aside") from exc
        finally:
            conn.close()

    def get(self, key: str, check: Check, now: str) -> str | None:
        """The document at ``key``; one that fails ``check`` is quarantined and reads as absent."""
        if not self.path.exists():
            return None
        with self._connect() as conn:
            row = conn.execute("SELECT state FROM learned WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        text = str(row[0])
        if (why := checked(check, text)) is None:
            return text
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._quarantine(conn, key, text, why, now, remove=True)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return None

    def update(self, key: str, change: Callable[[str | None], str], check: Check, now: str) -> str | None:
        """Replace the document at ``key`` by ``change(old)`` atomically; returns what is stored after.

        An old document that fails ``check`` is quarantined and ``change`` sees ``None``; a new one that
        fails it is quarantined instead of stored, and the old one stays.
        """
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT state FROM learned WHERE key = ?", (key,)).fetchone()
                old = None if row is None else str(row[0])
                if old is not None and (why := checked(check, old)) is not None:
                    self._quarantine(conn, key, old, why, now, remove=True)
                    old = None
                new = change(old)
                if (why := checked(check, new)) is not None:
                    self._quarantine(conn, key, new, f"refused on write: {why}", now, remove=False)
                    new_or_old = old
                else:
                    conn.execute(
                        "INSERT INTO learned (key, state, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO "
                        "UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                        (key, new, now),
                    )
                    new_or_old = new
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return new_or_old

    def quarantined(self, key: str) -> list[tuple[str, str]]:
        """(when, why) of the documents of ``key`` set aside, latest first."""
        if not self.path.exists():
            return []
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT at, reason FROM quarantine WHERE key = ? ORDER BY entry_id DESC LIMIT 20", (key,)
            ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    @staticmethod
    def _quarantine(conn: sqlite3.Connection, key: str, text: str, why: str, now: str, *, remove: bool) -> None:
        conn.execute(
            "INSERT INTO quarantine (key, state, reason, at) VALUES (?, ?, ?, ?)",
            (key, text[:100_000].encode("utf-8", "backslashreplace").decode("utf-8"), why[:1_000], now),
        )
        conn.execute(
            "DELETE FROM quarantine WHERE entry_id <= (SELECT MAX(entry_id) FROM quarantine) - ?",
            (MAX_QUARANTINE_ROWS,),
        )
        if remove:
            conn.execute("DELETE FROM learned WHERE key = ?", (key,))


def checked(check: Check, text: str) -> str | None:
    """Why ``text`` cannot be used (not UTF-8, or what ``check`` says), or ``None``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "the document is not UTF-8 text"
    return check(text)
