"""Folding a run's submissions and failures into the coverage matrix, inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from audit_mcp.core.models import RequeuedTask
from audit_mcp.store.records import Cell, CellState, PacketRow, RunRow, Verdict
from audit_mcp.store.tx import Tx

INVALID_RESULTS = "invalid_results"
"""The failure kind of a packet whose results file was refused when its run was merged."""
_REASON_CHARS = {INVALID_RESULTS: 1500}  # the next prompt quotes a refused file's errors, so keep them whole


@dataclass
class IngestOutcome:
    merged: int = 0
    failed: int = 0
    covered: int = 0
    requeued: list[RequeuedTask] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)


def ingest_run(
    tx: Tx,
    audit_id: int,
    run: RunRow,
    packets: Sequence[PacketRow],
    failed: Mapping[str, tuple[str, str]],
    max_attempts: int,
    now: str,
) -> IngestOutcome:
    """Accepted submissions mark their cells; everything else is requeued, or failed past the retry budget.

    ``failed`` gives, for every packet of the run without a submission, its failure kind and the error text.
    """
    out = IngestOutcome()
    signatures: set[str] = set()
    for packet in packets:
        cells = tx.cells_by_id(audit_id, tx.packet_task_ids(packet.packet_id))
        submission = tx.submission(packet.packet_id)
        if submission is not None:
            out.merged += 1
            tx.set_packet_state(packet.packet_id, "merged")
            for result in submission[1]["results"]:
                cell = cells[result["task_id"]]
                if result["status"] == "could_not_review":
                    why = f"could not review: {result.get('reason', '')}"
                    out.requeued.append(_requeue(tx, audit_id, cell, max_attempts, why, now))
                    continue
                state = CellState.REVIEWED if result["status"] == "reviewed" else CellState.NOT_APPLICABLE
                tx.update_cell(
                    audit_id,
                    cell.task_id,
                    state=state,
                    now=now,
                    run_id=run.run_id,
                    packet_id=packet.packet_id,
                    reason=result.get("reason"),
                )
                out.covered += 1
                for finding in result["findings"]:
                    tx.insert_finding(audit_id, run.run_id, packet.packet_id, cell.task_id, cell.lens, finding)
                for answer in result.get("leads", []):
                    tx.insert_verdict(
                        audit_id,
                        Verdict(answer["lead_id"], answer["verdict"], answer["reason"], packet.packet_id, cell.task_id),
                    )
            continue
        out.failed += 1
        kind, text = failed[packet.packet_id]
        out.kinds[kind] = out.kinds.get(kind, 0) + 1
        signatures.add(f"{kind}: {text[:300]}")
        tx.insert_failure(audit_id, run.run_id, packet.packet_id, kind, text, now)
        tx.set_packet_state(packet.packet_id, "failed")
        if kind == "auth_or_config":
            tx.set_blocker(
                audit_id,
                f"a subagent failed with an authentication or configuration error, which a "
                f"retry cannot fix: {text[:500]}. Fix it, then call next_step with retry_blocked=true.",
            )
        for cell in cells.values():
            why = f"{kind}: {text[: _REASON_CHARS.get(kind, 200)]}"
            out.requeued.append(_requeue(tx, audit_id, cell, max_attempts, why, now))
    if packets and out.failed == len(packets) and len(signatures) == 1:
        _stop_on_repeat(tx, audit_id, run, signatures.pop())
    return out


def _requeue(tx: Tx, audit_id: int, cell: Cell, max_attempts: int, why: str, now: str) -> RequeuedTask:
    attempts = cell.attempts + 1
    state = CellState.FAILED if attempts >= max_attempts else CellState.PENDING
    reason = why if state is CellState.PENDING else f"gave up after {attempts} attempt(s); last: {why}"
    tx.update_cell(audit_id, cell.task_id, state=state, now=now, attempts=attempts, reason=reason)
    return RequeuedTask(
        task_id=cell.task_id,
        file=cell.path,
        lens=cell.lens,
        why=why,
        state="failed" if state is CellState.FAILED else "pending",
    )


def _stop_on_repeat(tx: Tx, audit_id: int, run: RunRow, signature: str) -> None:
    """Every packet of this run and of the one before failed identically: retrying again would loop."""
    previous = [r for r in tx.runs(audit_id, plan=False) if r.seq == run.seq - 1]
    if not previous:
        return
    before = [f for f in tx.failures(audit_id) if f["run_id"] == previous[0].run_id]
    if len(before) == len(tx.packets(previous[0].run_id)) and {f"{f['kind']}: {f['detail'][:300]}" for f in before} == {
        signature
    }:
        tx.set_blocker(
            audit_id,
            f"every packet of two runs in a row failed the same way ({signature}); retrying "
            "again would loop. Fix the cause, then call next_step with retry_blocked=true.",
        )
