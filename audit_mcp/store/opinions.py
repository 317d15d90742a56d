"""Queries on the second opinions: the audit's threat model, verifiers' verdicts and runtime evidence."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import RuntimeEvidence, ThreatModelRow, VerdictRow


class OpinionQueries(Queries):
    """The threat model (one per audit), verdicts (one per verify cell), runtime evidence (many per finding)."""

    def put_threat_model(
        self, audit_id: int, *, task_id: str, packet_id: str | None, origin: str, payload: dict[str, Any], now: str
    ) -> None:
        self.conn.execute("DELETE FROM threat_models WHERE audit_id = ?", (audit_id,))
        self.conn.execute(
            "INSERT INTO threat_models (audit_id, task_id, packet_id, origin, payload, recorded_at)"
            " VALUES (?,?,?,?,?,?)",
            (audit_id, task_id, packet_id, origin, json.dumps(payload, sort_keys=True), now),
        )

    def threat_model(self, audit_id: int) -> ThreatModelRow | None:
        row = self.conn.execute(
            "SELECT task_id, packet_id, origin, payload, recorded_at FROM threat_models WHERE audit_id = ?",
            (audit_id,),
        ).fetchone()
        if row is None:
            return None
        return ThreatModelRow(row[0], row[1], row[2], json.loads(row[3]), row[4])

    def insert_finding_verdict(
        self, audit_id: int, *, task_id: str, subject: str, packet_id: str, payload: dict[str, Any]
    ) -> None:
        self.conn.execute("DELETE FROM finding_verdicts WHERE audit_id = ? AND task_id = ?", (audit_id, task_id))
        self.conn.execute(
            "INSERT INTO finding_verdicts (audit_id, task_id, subject, packet_id, payload) VALUES (?,?,?,?,?)",
            (audit_id, task_id, subject, packet_id, json.dumps(payload, sort_keys=True)),
        )

    def finding_verdicts(self, audit_id: int) -> list[VerdictRow]:
        rows = self.conn.execute(
            "SELECT task_id, subject, packet_id, payload FROM finding_verdicts WHERE audit_id = ? ORDER BY task_id",
            (audit_id,),
        )
        return [VerdictRow(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    def delete_finding_verdicts(self, audit_id: int, task_ids: Sequence[str]) -> None:
        self.conn.executemany(
            "DELETE FROM finding_verdicts WHERE audit_id = ? AND task_id = ?", [(audit_id, t) for t in task_ids]
        )

    def add_runtime_evidence(
        self, audit_id: int, *, fingerprint: str, verdict: str, payload: dict[str, Any], now: str
    ) -> int:
        row = self.conn.execute(
            "INSERT INTO runtime_evidence (audit_id, fingerprint, verdict, payload, added_at) VALUES (?,?,?,?,?)"
            " RETURNING evidence_id",
            (audit_id, fingerprint, verdict, json.dumps(payload, sort_keys=True), now),
        ).fetchone()
        return int(row[0])

    def runtime_evidence(self, audit_id: int) -> list[RuntimeEvidence]:
        rows = self.conn.execute(
            "SELECT evidence_id, fingerprint, verdict, payload, added_at FROM runtime_evidence WHERE audit_id = ?"
            " ORDER BY evidence_id",
            (audit_id,),
        )
        return [RuntimeEvidence(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]
