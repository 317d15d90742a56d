"""Learned rate-limit state per provider+model, in a small SQLite file outside any repository.

The file lives under the user's state directory (``$XDG_STATE_HOME/audit-mcp``
or ``~/.local/state/audit-mcp``); ``AUDIT_MCP_STATE_DIR`` overrides the
directory. Every update is a read-modify-write inside one ``BEGIN IMMEDIATE``
transaction, so concurrent processes serialise and lose nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from audit_mcp.scheduling.scheduler import Learned

STATE_FILENAME = "learned.sqlite3"
_DATES = {f.name for f in fields(Learned) if "datetime" in str(f.type)}


def learned_state_path() -> Path:
    """Where learned rate-limit state lives: per user, outside any repository."""
    base = os.environ.get("AUDIT_MCP_STATE_DIR")
    if base:
        return Path(base).expanduser() / STATE_FILENAME
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "audit-mcp" / STATE_FILENAME


def state_key(provider: str, model: str) -> str:
    return f"{provider}/{model}".lower()


def _encode(learned: Learned) -> str:
    data = asdict(learned)
    for name in _DATES:
        if data[name] is not None:
            data[name] = data[name].isoformat()
    return json.dumps(data, sort_keys=True)


def _decode(text: str) -> Learned:
    data: dict[str, Any] = json.loads(text)
    known = {f.name for f in fields(Learned)}
    data = {k: v for k, v in data.items() if k in known}
    for name in _DATES:
        if data.get(name):
            data[name] = datetime.fromisoformat(data[name])
    return Learned(**data)


class LearnedStore:
    """One SQLite file of learned state, keyed by provider+model."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or learned_state_path()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("CREATE TABLE IF NOT EXISTS learned (key TEXT PRIMARY KEY, state TEXT NOT NULL, "
                         "updated_at TEXT NOT NULL)")
            yield conn
        finally:
            conn.close()

    def get(self, key: str) -> Learned:
        if not self.path.exists():
            return Learned()
        with self._connect() as conn:
            row = conn.execute("SELECT state FROM learned WHERE key = ?", (key,)).fetchone()
        return _decode(row[0]) if row else Learned()

    def update(self, key: str, change: Callable[[Learned], Learned], now: datetime) -> Learned:
        """Apply ``change`` to the stored state atomically and return the result."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT state FROM learned WHERE key = ?", (key,)).fetchone()
                new = change(_decode(row[0]) if row else Learned())
                conn.execute("INSERT INTO learned (key, state, updated_at) VALUES (?, ?, ?) ON CONFLICT(key) DO "
                             "UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                             (key, _encode(new), now.isoformat()))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return new
