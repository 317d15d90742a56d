"""Queries on the repository's history: the earlier findings a re-review is shown, and their resolutions."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import EarlierFinding, Resolution


class HistoryQueries(Queries):
    """Earlier findings by task, and resolutions by fingerprint."""

    def insert_earlier(self, audit_id: int, rows: Iterable[EarlierFinding]) -> None:
        self.conn.executemany(
            "INSERT INTO earlier_findings (audit_id, task_id, ref, from_audit, fingerprint, payload)"
            " VALUES (?,?,?,?,?,?)",
            [
                (audit_id, r.task_id, r.ref, r.from_audit, r.fingerprint, json.dumps(r.finding, sort_keys=True))
                for r in rows
            ],
        )

    def earlier_findings(self, audit_id: int, task_ids: Sequence[str] | None = None) -> list[EarlierFinding]:
        """The earlier findings of ``task_ids`` (every task when ``None``), in task and reference order."""
        rows = self.conn.execute(
            "SELECT task_id, ref, from_audit, fingerprint, payload FROM earlier_findings WHERE audit_id = ?"
            " ORDER BY task_id, ref",
            (audit_id,),
        )
        wanted = None if task_ids is None else set(task_ids)
        return [
            EarlierFinding(r["task_id"], r["ref"], r["from_audit"], r["fingerprint"], json.loads(r["payload"]))
            for r in rows
            if wanted is None or r["task_id"] in wanted
        ]

    def insert_resolution(self, audit_id: int, resolution: Resolution) -> None:
        """Record how an earlier finding was resolved; the first resolution of a fingerprint stands."""
        known = self.conn.execute(
            "SELECT 1 FROM resolutions WHERE audit_id = ? AND fingerprint = ?", (audit_id, resolution.fingerprint)
        ).fetchone()
        if known is None:
            self.conn.execute(
                "INSERT INTO resolutions (audit_id, fingerprint, how, payload) VALUES (?,?,?,?)",
                (audit_id, resolution.fingerprint, resolution.how, json.dumps(resolution.detail, sort_keys=True)),
            )

    def resolutions(self, audit_id: int) -> dict[str, Resolution]:
        rows = self.conn.execute("SELECT fingerprint, how, payload FROM resolutions WHERE audit_id = ?", (audit_id,))
        return {r["fingerprint"]: Resolution(r["fingerprint"], r["how"], _detail(r["payload"])) for r in rows}


def _detail(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}
