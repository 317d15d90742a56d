"""Queries on the run ledger: who did what, when, with what outcome."""

from __future__ import annotations

from typing import Any

from audit_mcp.store.queries import Queries


class LedgerQueries(Queries):
    """The append-only ledger that ``status`` shows."""

    def log(self, *, now: str, audit_id: int | None, actor: str, action: str, detail: str, outcome: str) -> None:
        self.conn.execute(
            "INSERT INTO ledger (at, audit_id, actor, action, detail, outcome) VALUES (?,?,?,?,?,?)",
            (now, audit_id, actor, action, detail, outcome),
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
