"""Queries on requeue requests: a person's or host's ask to review cells again, with the reason."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit_mcp.store.queries import Queries


class RequeueQueries(Queries):
    """Requeue requests: recorded when asked, shown to the next packets of their cells, served on merge."""

    def add_requeue(self, audit_id: int, task_ids: Sequence[str], reason: str, actor: str, now: str) -> None:
        self.conn.executemany(
            "INSERT INTO requeues (audit_id, task_id, reason, requested_at, actor) VALUES (?,?,?,?,?)",
            [(audit_id, t, reason, now, actor) for t in task_ids],
        )

    def open_requeues(self, audit_id: int, task_ids: Sequence[str]) -> dict[str, list[str]]:
        """The reasons of requests not yet served by a merged review, by task (oldest first)."""
        found: dict[str, list[str]] = {}
        for i in range(0, len(task_ids), 500):
            batch = task_ids[i : i + 500]
            rows = self.conn.execute(
                "SELECT task_id, reason FROM requeues WHERE audit_id = ? AND served_run_id IS NULL"
                f" AND task_id IN ({','.join('?' for _ in batch)}) ORDER BY request_id",
                [audit_id, *batch],
            )
            for task_id, reason in rows:
                found.setdefault(task_id, []).append(reason)
        return found

    def requeues_of(self, audit_id: int, task_id: str) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT reason, requested_at, actor, served_run_id FROM requeues WHERE audit_id = ? AND task_id = ?"
            " ORDER BY request_id",
            (audit_id, task_id),
        )
        return [dict(r) for r in rows]

    def serve_requeues(self, audit_id: int, run_id: str) -> int:
        """Mark served the requests whose cells this merged run reviewed; returns how many."""
        cursor = self.conn.execute(
            # Each open request looks up its own cell: the cost is the requests', not the audit's cells'.
            "UPDATE requeues SET served_run_id = ? WHERE audit_id = ? AND served_run_id IS NULL AND EXISTS"
            " (SELECT 1 FROM cells c WHERE c.audit_id = ? AND c.task_id = requeues.task_id AND c.run_id = ?"
            " AND c.state IN ('reviewed', 'not_applicable', 'carried'))",
            (run_id, audit_id, audit_id, run_id),
        )
        return cursor.rowcount
