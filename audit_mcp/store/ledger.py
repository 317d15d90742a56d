"""Queries on the run ledger: who did what, when, with what outcome.

An entry says what happened in words (``detail``) and, where a reader needs fields, in ``data`` (a JSON
object): a headless worker's packet, start, end and exit status, a merge's reported usage, the forecast made
before an audit's first dispatch. Entries are only ever appended.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from audit_mcp.store.queries import Queries

_PAGE = 1_000


class LedgerQueries(Queries):
    """The append-only ledger that ``status`` shows and ``audit-mcp ledger`` exports."""

    def log(
        self,
        *,
        now: str,
        audit_id: int | None,
        actor: str,
        action: str,
        detail: str,
        outcome: str,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        self.conn.execute(
            "INSERT INTO ledger (at, audit_id, actor, action, detail, outcome, data) VALUES (?,?,?,?,?,?,?)",
            (now, audit_id, actor, action, detail, outcome, None if data is None else json.dumps(data)),
        )

    def ledger(self, audit_id: int, limit: int = 50) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT at, actor, action, detail, outcome FROM ledger WHERE audit_id = ? ORDER BY entry_id DESC LIMIT ?",
            (audit_id, limit),
        )
        return [dict(r) for r in rows]

    def ledger_details(self, audit_id: int, action: str) -> list[str]:
        """The details of every entry of ``action`` for the audit, oldest first."""
        rows = self.conn.execute(
            "SELECT detail FROM ledger WHERE audit_id = ? AND action = ? ORDER BY entry_id", (audit_id, action)
        )
        return [r[0] for r in rows]

    def ledger_data(self, audit_id: int, action: str) -> list[dict[str, Any]]:
        """The ``data`` of every entry of ``action`` for the audit that has some, oldest first."""
        rows = self.conn.execute(
            "SELECT data FROM ledger WHERE audit_id = ? AND action = ? AND data IS NOT NULL ORDER BY entry_id",
            (audit_id, action),
        )
        return [_object(r[0]) for r in rows]

    def ledger_entries(self, audit_id: int | None = None) -> Iterator[dict[str, Any]]:
        """Every entry (of one audit, or of all), oldest first, read a page at a time: ``entry_id``, ``at``,
        ``audit_id``, ``actor``, ``action``, ``detail``, ``outcome`` and ``data`` (an object, or None)."""
        after = 0
        where = "" if audit_id is None else " AND audit_id = ?"
        while True:
            rows = self.conn.execute(
                "SELECT entry_id, at, audit_id, actor, action, detail, outcome, data FROM ledger"
                f" WHERE entry_id > ?{where} ORDER BY entry_id LIMIT ?",
                (after, audit_id, _PAGE) if audit_id is not None else (after, _PAGE),
            ).fetchall()
            for row in rows:
                entry = dict(row)
                entry["data"] = _object(entry["data"]) if entry["data"] is not None else None
                yield entry
            if len(rows) < _PAGE:
                return
            after = int(rows[-1][0])


def _object(text: str) -> dict[str, Any]:
    """A ledger entry's data: the object the store wrote (anything else, read as no fields)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
