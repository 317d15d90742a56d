"""Queries on what reviews produced: findings, failures, analyzer leads and their verdicts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import Lead, Verdict, lead_from_json


class FindingQueries(Queries):
    """Findings by task, packet failures, leads and lead verdicts."""

    def insert_finding(
        self, audit_id: int, run_id: str, packet_id: str, task_id: str, lens: str, payload: dict[str, Any]
    ) -> None:
        self.conn.execute(
            "INSERT INTO findings (audit_id, run_id, packet_id, task_id, lens, payload) VALUES (?,?,?,?,?,?)",
            (audit_id, run_id, packet_id, task_id, lens, json.dumps(payload, sort_keys=True)),
        )

    def delete_findings(self, audit_id: int, task_ids: Sequence[str]) -> int:
        """Withdraw the findings of these tasks; returns how many."""
        removed = 0
        for task_id in task_ids:
            cur = self.conn.execute("DELETE FROM findings WHERE audit_id = ? AND task_id = ?", (audit_id, task_id))
            removed += cur.rowcount
        return removed

    def findings(self, audit_id: int) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT finding_id, run_id, packet_id, task_id, lens, payload FROM findings"
            " WHERE audit_id = ? ORDER BY finding_id",
            (audit_id,),
        )
        out = []
        for r in rows:
            item = json.loads(r["payload"])
            item.update(
                finding_id=r["finding_id"],
                run_id=r["run_id"],
                packet_id=r["packet_id"],
                task_id=r["task_id"],
                lens=r["lens"],
            )
            out.append(item)
        return out

    def findings_of_task(self, audit_id: int, task_id: str) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT finding_id, run_id, packet_id, payload FROM findings WHERE audit_id = ? AND task_id = ?"
            " ORDER BY finding_id",
            (audit_id, task_id),
        )
        return [json.loads(r["payload"]) | {"run_id": r["run_id"], "packet_id": r["packet_id"]} for r in rows]

    def failures_of_packets(self, audit_id: int, packet_ids: Sequence[str]) -> list[dict[str, str]]:
        if not packet_ids:
            return []
        rows = self.conn.execute(
            "SELECT run_id, packet_id, kind, detail, at FROM failures WHERE audit_id = ?"
            f" AND packet_id IN ({','.join('?' for _ in packet_ids)}) ORDER BY failure_id",
            [audit_id, *packet_ids],
        )
        return [dict(r) for r in rows]

    def insert_failure(self, audit_id: int, run_id: str, packet_id: str, kind: str, detail: str, now: str) -> None:
        self.conn.execute(
            "INSERT INTO failures (audit_id, run_id, packet_id, kind, detail, at) VALUES (?,?,?,?,?,?)",
            (audit_id, run_id, packet_id, kind, detail, now),
        )

    def failures(self, audit_id: int) -> list[dict[str, str]]:
        rows = self.conn.execute(
            "SELECT run_id, packet_id, kind, detail, at FROM failures WHERE audit_id = ? ORDER BY failure_id",
            (audit_id,),
        )
        return [dict(r) for r in rows]

    # analyzer leads ------------------------------------------------------------------
    def insert_leads(self, audit_id: int, leads: Iterable[Lead]) -> None:
        self.conn.executemany(
            "INSERT INTO leads (audit_id, lead_id, path, start_line, payload) VALUES (?,?,?,?,?)",
            [(audit_id, x.lead_id, x.path, x.start_line, json.dumps(x.as_json(), sort_keys=True)) for x in leads],
        )

    def leads(self, audit_id: int, packet_id: str | None = None) -> list[Lead]:
        """Every lead of the audit, or those a packet carries."""
        if packet_id is None:
            rows = self.conn.execute("SELECT payload FROM leads WHERE audit_id = ? ORDER BY lead_id", (audit_id,))
        else:
            rows = self.conn.execute(
                "SELECT l.payload FROM leads l JOIN packet_leads p ON p.lead_id = l.lead_id"
                " WHERE l.audit_id = ? AND p.packet_id = ? ORDER BY l.lead_id",
                (audit_id, packet_id),
            )
        return [lead_from_json(json.loads(r[0])) for r in rows]

    def assign_leads(self, packet_id: str, lead_ids: Iterable[str]) -> None:
        self.assign_run_leads({packet_id: lead_ids})

    def assign_run_leads(self, by_packet: Mapping[str, Iterable[str]]) -> None:
        """The analyzer leads each packet of a run carries, in one statement."""
        rows = [(packet_id, x) for packet_id, lead_ids in by_packet.items() for x in lead_ids]
        if rows:
            self.conn.executemany("INSERT INTO packet_leads (packet_id, lead_id) VALUES (?, ?)", rows)

    def insert_verdict(self, audit_id: int, verdict: Verdict) -> None:
        self.conn.execute(
            "INSERT INTO lead_verdicts (audit_id, lead_id, packet_id, task_id, verdict, reason) VALUES (?,?,?,?,?,?)"
            " ON CONFLICT (audit_id, lead_id, packet_id, task_id)"
            " DO UPDATE SET verdict = excluded.verdict, reason = excluded.reason",
            (audit_id, verdict.lead_id, verdict.packet_id, verdict.task_id, verdict.verdict, verdict.reason),
        )

    def verdicts(self, audit_id: int) -> list[Verdict]:
        rows = self.conn.execute(
            "SELECT lead_id, verdict, reason, packet_id, task_id FROM lead_verdicts WHERE audit_id = ?"
            " ORDER BY lead_id, packet_id, task_id",
            (audit_id,),
        )
        return [Verdict(r[0], r[1], r[2], r[3], r[4]) for r in rows]
