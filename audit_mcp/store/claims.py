"""Queries on packet claims: which host holds which packet of an open run, until when.

In a shared store several hosts work on one run. A host claims packets nobody holds; on PostgreSQL the
claim locks only the rows it takes (``FOR UPDATE SKIP LOCKED``), so hosts claiming at once get disjoint
packets without waiting for each other. A claim carries a lease (``lease_expires_at``) that its host
renews while it works; a claim whose lease lapsed without a submission is released, and the packet's
next claim is its next attempt (``claim_attempt``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from audit_mcp.store.queries import Queries

_NOT_SUBMITTED = "NOT EXISTS (SELECT 1 FROM submissions s WHERE s.packet_id = p.packet_id)"


@dataclass(frozen=True)
class Claim:
    packet_id: str
    holder: str | None
    attempt: int
    claimed_at: str | None
    lease_expires_at: str | None
    state: str


class ClaimQueries(Queries):
    """Claiming, renewing and releasing packets of a run."""

    def _skip_locked(self, *, wait: bool = False) -> str:
        # SQLite has one writer at a time, so nothing is locked to skip.
        if self.dialect != "postgresql":
            return ""
        return " FOR UPDATE OF p" if wait else " FOR UPDATE OF p SKIP LOCKED"

    def claim_packets(
        self, run_id: str, holder: str, now: str, lease_until: str, limit: int, *, wait: bool = False
    ) -> list[str]:
        """Claim up to ``limit`` packets of the run that nobody holds and nobody answered, in order; rows
        other claims are taking are skipped, or with ``wait`` waited for (and taken only if still free)."""
        if limit <= 0:
            return []
        rows = self.conn.execute(
            "SELECT p.packet_id FROM packets p WHERE p.run_id = ? AND p.state = 'issued' AND p.holder IS NULL"
            f" AND {_NOT_SUBMITTED} ORDER BY p.seq LIMIT ?{self._skip_locked(wait=wait)}",
            (run_id, limit),
        ).fetchall()
        ids = [r[0] for r in rows]
        self.conn.executemany(
            "UPDATE packets SET holder = ?, claimed_at = ?, lease_expires_at = ?, claim_attempt = claim_attempt + 1"
            " WHERE packet_id = ?",
            [(holder, now, lease_until, packet_id) for packet_id in ids],
        )
        return ids

    def renew_claims(self, run_id: str, holder: str, lease_until: str) -> int:
        """Extend the lease of every packet ``holder`` holds and has not answered; returns how many."""
        cursor = self.conn.execute(
            "UPDATE packets SET lease_expires_at = ? WHERE run_id = ? AND holder = ? AND state = 'issued'",
            (lease_until, run_id, holder),
        )
        return cursor.rowcount

    def lapsed_claims(self, run_id: str, now: str) -> list[Claim]:
        """Claims of the run whose lease ended without an answer, locked for release."""
        rows = self.conn.execute(
            "SELECT p.packet_id, p.holder, p.claim_attempt, p.claimed_at, p.lease_expires_at, p.state FROM packets p"
            " WHERE p.run_id = ? AND p.holder IS NOT NULL AND p.state = 'issued' AND p.lease_expires_at <= ?"
            f" AND {_NOT_SUBMITTED} ORDER BY p.seq{self._skip_locked()}",
            (run_id, now),
        ).fetchall()
        return [Claim(*r) for r in rows]

    def release_claims(self, packet_ids: Sequence[str]) -> None:
        """Return packets to the run's queue: their next claim is their next attempt."""
        self.conn.executemany(
            "UPDATE packets SET holder = NULL, claimed_at = NULL, lease_expires_at = NULL WHERE packet_id = ?",
            [(p,) for p in packet_ids],
        )

    def claims(self, run_id: str) -> list[Claim]:
        rows = self.conn.execute(
            "SELECT packet_id, holder, claim_attempt, claimed_at, lease_expires_at, state FROM packets"
            " WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
        return [Claim(*r) for r in rows]

    def claim_of(self, packet_id: str, *, lock: bool = False) -> Claim | None:
        """The packet's claim; ``lock`` keeps it from being released or taken until the transaction ends."""
        row = self.conn.execute(
            "SELECT packet_id, holder, claim_attempt, claimed_at, lease_expires_at, state FROM packets"
            " WHERE packet_id = ?" + (" FOR UPDATE" if lock and self.dialect == "postgresql" else ""),
            (packet_id,),
        ).fetchone()
        return None if row is None else Claim(*row)

    def give_up_packet(self, packet_id: str, error: str) -> None:
        """Its holder reported the packet failed: it waits, with the error, for the run's merge to requeue it."""
        self.conn.execute(
            "UPDATE packets SET state = 'failed', reported_error = ? WHERE packet_id = ? AND state = 'issued'",
            (error, packet_id),
        )

    def reported_errors(self, run_id: str) -> dict[str, str]:
        """The errors the holders of the run's given-up packets reported, by packet."""
        rows = self.conn.execute(
            "SELECT packet_id, reported_error FROM packets WHERE run_id = ? AND reported_error IS NOT NULL"
            " ORDER BY seq",
            (run_id,),
        ).fetchall()
        return {r[0]: r[1] for r in rows}
