"""Forecasts recorded under the queue's generation they were packed at.

A forecast packs the next run from store state that only a write raising the queue's generation changes
(``generation``), so the packets it found hold, for every process and host of the store, while that
generation stands. The body is the caller's (its packets' sizes, no packet ids); ``key`` names what else the
packing depended on (the budget, the run's size, the config). A record of an older generation is never read
again, and goes when a newer one is written; a write that raises the generation without changing anything a
packing reads carries the records to the generation it commits (``carry_forecasts``).
"""

from __future__ import annotations

from audit_mcp.store.queries import Queries


class ForecastQueries(Queries):
    def recorded_forecast(self, audit_id: int, key: str, queue_generation: int) -> str | None:
        """The body recorded for ``key`` at exactly this queue generation, if any."""
        row = self.conn.execute(
            "SELECT body FROM forecasts WHERE audit_id = ? AND key = ? AND q = ?", (audit_id, key, queue_generation)
        ).fetchone()
        return None if row is None else str(row[0])

    def record_forecast(self, audit_id: int, key: str, queue_generation: int, body: str) -> None:
        """Record ``body`` for ``key`` at ``queue_generation``, dropping the audit's records of older ones."""
        self.conn.execute("DELETE FROM forecasts WHERE audit_id = ? AND q < ?", (audit_id, queue_generation))
        self.conn.execute(
            "INSERT INTO forecasts (audit_id, key, q, body) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (audit_id, key) DO UPDATE SET q = excluded.q, body = excluded.body "
            "WHERE excluded.q >= forecasts.q",
            (audit_id, key, queue_generation, body),
        )

    def carry_forecasts(self, audit_id: int, read: int, committed: int) -> int:
        """Move the audit's records at queue generation ``read`` (the one this write transaction reads) to
        ``committed`` (the one it commits), for a write that raises the generation but changes nothing a
        packing reads (a merge that only settles its own run's cells); the number of records carried."""
        cursor = self.conn.execute(
            "UPDATE forecasts SET q = ? WHERE audit_id = ? AND q = ?", (committed, audit_id, read)
        )
        return int(cursor.rowcount)
