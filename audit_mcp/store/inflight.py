"""A run in flight: what it was scheduled for (so that usage and failures can be learned as they arrive, without
reading its whole plan), and the failures the host reported before the merge."""

from __future__ import annotations

import json
from typing import Any

from audit_mcp.store.queries import Queries


class InflightQueries(Queries):
    def put_run_context(self, run_id: str, context: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT INTO run_contexts (run_id, context) VALUES (?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET context = excluded.context",
            (run_id, json.dumps(context, sort_keys=True)),
        )

    def run_context(self, run_id: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT context FROM run_contexts WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def report_failure(self, packet_id: str, run_id: str, detail: str, at: str) -> bool:
        """Record a failure the host reported mid-run; False when that packet's failure was already reported."""
        cursor = self.conn.execute(
            "INSERT INTO reported_failures (packet_id, run_id, detail, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (packet_id) DO NOTHING",
            (packet_id, run_id, detail, at),
        )
        return cursor.rowcount > 0

    def reported_failures(self, run_id: str) -> dict[str, str]:
        """The failures reported for a run before its merge, by packet id."""
        rows = self.conn.execute(
            "SELECT packet_id, detail FROM reported_failures WHERE run_id = ? ORDER BY at, packet_id", (run_id,)
        )
        return {r[0]: r[1] for r in rows}
