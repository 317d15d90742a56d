"""Queries on runs, their packets, leases and accepted submissions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import PacketRow, RunRow


def plan_json(plan: dict[str, Any]) -> str:
    """A run's plan as the store keeps it: compact JSON, keys sorted."""
    return json.dumps(plan, sort_keys=True)


_PACKET_COLUMNS = "packet_id, run_id, seq, state, estimated_tokens, model_tier, tier_reason, prompt_path, kind"


class RunQueries(Queries):
    """Runs (one dispatch each), packets with their tasks and leases, and submissions."""

    # A run's plan can be megabytes on a large repository: it is kept in a table of its own (a change of the
    # run's state does not rewrite it) and read only when ``plan=True``.
    _RUN_COLUMNS = "r.run_id, r.audit_id, r.seq, r.kind, r.state, r.created_at, r.merged_at, r.wave_size"
    _WITH_PLAN = f"{_RUN_COLUMNS}, p.plan FROM runs r LEFT JOIN run_plans p ON p.run_id = r.run_id"

    def _from(self, plan: bool) -> str:
        return self._WITH_PLAN if plan else f"{self._RUN_COLUMNS} FROM runs r"

    def runs(self, audit_id: int, *, plan: bool = True) -> list[RunRow]:
        rows = self.conn.execute(f"SELECT {self._from(plan)} WHERE r.audit_id = ? ORDER BY r.seq", (audit_id,))
        return [self._run(r) for r in rows]

    def run_waves(self, audit_id: int) -> dict[str, list[Any]]:
        """Each run's waves (lists of packet ids), read out of its plan without parsing the whole plan."""
        # JSON path extraction has no portable SQL spelling: each backend spells this one query its way.
        waves = (
            "json_extract(p.plan, '$.waves')"
            if self.dialect == "sqlite"
            else "CAST(CAST(p.plan AS json) -> 'waves' AS TEXT)"
        )
        rows = self.conn.execute(
            f"SELECT r.run_id, {waves} FROM runs r LEFT JOIN run_plans p ON p.run_id = r.run_id"
            " WHERE r.audit_id = ? ORDER BY r.seq",
            (audit_id,),
        )
        return {r[0]: json.loads(r[1]) if r[1] else [] for r in rows}

    def launch_order(self, run_id: str) -> list[str]:
        """A run's packets in launch order, read out of its plan without parsing the whole plan."""
        order = (
            "json_extract(plan, '$.launch_order')"
            if self.dialect == "sqlite"
            else "CAST(CAST(plan AS json) -> 'launch_order' AS TEXT)"
        )
        row = self.conn.execute(f"SELECT {order} FROM run_plans WHERE run_id = ?", (run_id,)).fetchone()
        return [str(p) for p in json.loads(row[0])] if row is not None and row[0] else []

    def run(self, run_id: str, *, plan: bool = True) -> RunRow | None:
        row = self.conn.execute(f"SELECT {self._from(plan)} WHERE r.run_id = ?", (run_id,)).fetchone()
        return None if row is None else self._run(row)

    @staticmethod
    def _run(r: Any) -> RunRow:
        return RunRow(
            run_id=r["run_id"],
            audit_id=r["audit_id"],
            seq=r["seq"],
            kind=r["kind"],
            state=r["state"],
            created_at=r["created_at"],
            merged_at=r["merged_at"],
            wave_size=r["wave_size"],
            plan=json.loads(r["plan"]) if "plan" in r.keys() and r["plan"] is not None else {},  # noqa: SIM118
        )

    def insert_run(self, run: RunRow, plan_text: str | None = None) -> None:
        """A new run and its plan; ``plan_text`` is ``plan_json(run.plan)`` when the caller has it already."""
        self.conn.execute(
            "INSERT INTO runs (run_id, audit_id, seq, kind, state, created_at, merged_at, wave_size)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (run.run_id, run.audit_id, run.seq, run.kind, run.state, run.created_at, run.merged_at, run.wave_size),
        )
        text = plan_json(run.plan) if plan_text is None else plan_text
        self.conn.execute("INSERT INTO run_plans (run_id, plan) VALUES (?, ?)", (run.run_id, text))

    def finish_run(self, run_id: str, now: str) -> None:
        self.conn.execute("UPDATE runs SET state = 'merged', merged_at = ? WHERE run_id = ?", (now, run_id))

    def abandon_run(self, run_id: str, now: str) -> None:
        """Close a run of an abandoned audit: it takes no more submissions, and its packets are abandoned."""
        self.conn.execute("UPDATE runs SET state = 'abandoned', merged_at = ? WHERE run_id = ?", (now, run_id))
        self.conn.execute(
            "UPDATE packets SET state = 'abandoned' WHERE run_id = ? AND state IN ('issued', 'submitted')", (run_id,)
        )

    def packets_of_task(self, audit_id: int, task_id: str) -> list[PacketRow]:
        """Every packet that ever held a task, in dispatch order."""
        rows = self.conn.execute(
            "SELECT p.* FROM packets p JOIN packet_tasks t ON t.packet_id = p.packet_id"
            " JOIN runs r ON r.run_id = p.run_id WHERE p.audit_id = ? AND t.task_id = ? ORDER BY r.seq, p.seq",
            (audit_id, task_id),
        )
        return [self._packet(r) for r in rows]

    def insert_packet(self, audit_id: int, packet: PacketRow, task_ids: Sequence[str]) -> None:
        self.insert_packets(audit_id, [(packet, task_ids)])

    def insert_packets(self, audit_id: int, packets: Sequence[tuple[PacketRow, Sequence[str]]]) -> None:
        """A run's packets and the tasks each holds: one statement for the packets, one for their tasks (a
        run of 200 packets is two round trips to a shared store, not 400)."""
        self.conn.executemany(
            "INSERT INTO packets (packet_id, run_id, audit_id, seq, state, estimated_tokens, model_tier,"
            " tier_reason, prompt_path, kind) VALUES (?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    p.packet_id,
                    p.run_id,
                    audit_id,
                    p.seq,
                    p.state,
                    p.estimated_tokens,
                    p.model_tier,
                    p.tier_reason,
                    p.prompt_path,
                    p.kind,
                )
                for p, _ in packets
            ],
        )
        self.conn.executemany(
            "INSERT INTO packet_tasks (packet_id, task_id) VALUES (?, ?)",
            [(p.packet_id, t) for p, task_ids in packets for t in task_ids],
        )

    def packets(self, run_id: str) -> list[PacketRow]:
        rows = self.conn.execute(f"SELECT {_PACKET_COLUMNS} FROM packets WHERE run_id = ? ORDER BY seq", (run_id,))
        return [PacketRow(*r) for r in rows]  # positional: a run has hundreds of packets

    def packet(self, packet_id: str) -> PacketRow | None:
        row = self.conn.execute("SELECT * FROM packets WHERE packet_id = ?", (packet_id,)).fetchone()
        return None if row is None else self._packet(row)

    @staticmethod
    def _packet(r: Any) -> PacketRow:
        return PacketRow(
            packet_id=r["packet_id"],
            run_id=r["run_id"],
            seq=r["seq"],
            state=r["state"],
            estimated_tokens=r["estimated_tokens"],
            model_tier=r["model_tier"],
            tier_reason=r["tier_reason"],
            prompt_path=r["prompt_path"],
            kind=r["kind"],
        )

    def set_packet_state(self, packet_id: str, state: str) -> None:
        self.conn.execute("UPDATE packets SET state = ? WHERE packet_id = ?", (state, packet_id))

    def lease_packets(self, run_id: str, expires_at: str) -> None:
        self.conn.execute("UPDATE packets SET lease_expires_at = ? WHERE run_id = ?", (expires_at, run_id))

    def packet_lease(self, packet_id: str) -> str | None:
        row = self.conn.execute("SELECT lease_expires_at FROM packets WHERE packet_id = ?", (packet_id,)).fetchone()
        return None if row is None else row[0]

    def expired_packet_ids(self, run_id: str, now: str) -> list[str]:
        """Packets of the run whose lease has ended without an accepted submission."""
        rows = self.conn.execute(
            "SELECT packet_id FROM packets p WHERE run_id = ? AND lease_expires_at IS NOT NULL"
            " AND lease_expires_at <= ? AND NOT EXISTS (SELECT 1 FROM submissions s WHERE s.packet_id = p.packet_id)"
            " ORDER BY seq",
            (run_id, now),
        )
        return [r[0] for r in rows]

    def assigned_packets(self, audit_id: int, task_ids: Sequence[str]) -> list[str]:
        """The packets that hold any of these tasks now."""
        found: set[str] = set()
        for i in range(0, len(task_ids), 500):
            batch = task_ids[i : i + 500]
            rows = self.conn.execute(
                "SELECT DISTINCT packet_id FROM cells WHERE audit_id = ? AND state = 'assigned'"
                f" AND task_id IN ({','.join('?' for _ in batch)})",
                [audit_id, *batch],
            )
            found.update(r[0] for r in rows if r[0])
        return sorted(found)

    def run_task_ids(self, run_id: str) -> dict[str, list[str]]:
        """Every packet of a run with its task ids, in one query."""
        rows = self.conn.execute(
            "SELECT pt.packet_id, pt.task_id FROM packets p JOIN packet_tasks pt ON pt.packet_id = p.packet_id"
            " WHERE p.run_id = ? ORDER BY pt.packet_id, pt.task_id",
            (run_id,),
        )
        out: dict[str, list[str]] = {}
        for packet_id, task_id in rows:
            out.setdefault(packet_id, []).append(task_id)
        return out

    def set_packet_states(self, states: Sequence[tuple[str, str]]) -> None:
        """(packet id, state) pairs, in one statement."""
        self.conn.executemany("UPDATE packets SET state = ? WHERE packet_id = ?", [(s, p) for p, s in states])

    def packet_task_ids(self, packet_id: str) -> list[str]:
        rows = self.conn.execute("SELECT task_id FROM packet_tasks WHERE packet_id = ? ORDER BY task_id", (packet_id,))
        return [r[0] for r in rows]

    # submissions, findings, failures ---------------------------------------------
    def submission(self, packet_id: str) -> tuple[str, dict[str, Any]] | None:
        row = self.conn.execute("SELECT digest, payload FROM submissions WHERE packet_id = ?", (packet_id,)).fetchone()
        return None if row is None else (row[0], json.loads(row[1]))

    def put_submission(
        self,
        packet_id: str,
        run_id: str,
        digest: str,
        payload: dict[str, Any] | str,
        now: str,
        origin: str | None = None,
        *,
        parts: dict[str, Any] | None = None,
    ) -> None:
        """Record an accepted submission (``payload`` as an object, or already as its JSON text); ``origin``
        names a results file it was ingested from (None: a call), ``parts`` what merging it needs
        (``engine.ingest.merge_parts``; None: the merge reads the payload instead)."""
        self.conn.execute("DELETE FROM submissions WHERE packet_id = ?", (packet_id,))
        self.conn.execute(
            "INSERT INTO submissions (packet_id, run_id, digest, payload, accepted_at, origin, parts)"
            " VALUES (?,?,?,?,?,?,?)",
            (
                packet_id,
                run_id,
                digest,
                payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True),
                now,
                origin,
                None if parts is None else json.dumps(parts),
            ),
        )

    def submission_record(self, packet_id: str) -> dict[str, Any] | None:
        """When and how a packet's accepted submission arrived: ``{accepted_at, origin, digest}``."""
        row = self.conn.execute(
            "SELECT accepted_at, origin, digest FROM submissions WHERE packet_id = ?", (packet_id,)
        ).fetchone()
        return None if row is None else dict(row)

    def run_merge_parts(self, run_id: str) -> dict[str, dict[str, Any]]:
        """What merging needs of each accepted submission of a run, by packet id, in one query: the parts
        recorded with it, or (recorded without them) its whole payload, which reads as parts."""
        rows = self.conn.execute(
            "SELECT packet_id, COALESCE(parts, payload) FROM submissions WHERE run_id = ?", (run_id,)
        )
        return {r[0]: json.loads(r[1]) for r in rows}

    def run_paths(self, run_id: str) -> set[str]:
        """The paths the tasks of a run's packets cover: named by each submission's merge parts, looked up
        through the task lists of the packets whose submission names none (or that have none)."""
        paths: set[str] = set()
        unnamed: list[str] = []
        rows = self.conn.execute(
            "SELECT p.packet_id, s.parts FROM packets p LEFT JOIN submissions s ON s.packet_id = p.packet_id"
            " WHERE p.run_id = ?",
            (run_id,),
        )
        for packet_id, parts in rows:
            files = json.loads(parts).get("files") if parts is not None else None
            if files is None:
                unnamed.append(packet_id)
            else:
                paths.update(files)
        for i in range(0, len(unnamed), 500):
            batch = unnamed[i : i + 500]
            found = self.conn.execute(
                "SELECT DISTINCT c.path FROM packets p JOIN packet_tasks pt ON pt.packet_id = p.packet_id"
                " JOIN cells c ON c.audit_id = p.audit_id AND c.task_id = pt.task_id"
                f" WHERE p.packet_id IN ({','.join('?' for _ in batch)})",
                batch,
            )
            paths.update(r[0] for r in found)
        return paths

    def run_submissions(self, audit_id: int) -> list[tuple[str, str, dict[str, Any]]]:
        """Every accepted submission to the audit's runs, oldest first: (run id, when, the usage it reported),
        the usage read out of the recorded parts (or payload) without parsing the rest."""
        doc = "COALESCE(s.parts, s.payload)"
        usage = (
            f"json_extract({doc}, '$.usage')"
            if self.dialect == "sqlite"
            else f"CAST(CAST({doc} AS json) -> 'usage' AS TEXT)"
        )
        rows = self.conn.execute(
            f"SELECT s.run_id, s.accepted_at, {usage} FROM submissions s JOIN runs r ON r.run_id = s.run_id"
            " WHERE r.audit_id = ? ORDER BY s.accepted_at, s.packet_id",
            (audit_id,),
        )
        return [(r[0], r[1], (json.loads(r[2]) if r[2] else None) or {}) for r in rows]

    def submitted_packet_ids(self, run_id: str) -> set[str]:
        rows = self.conn.execute("SELECT packet_id FROM submissions WHERE run_id = ?", (run_id,))
        return {r[0] for r in rows}
