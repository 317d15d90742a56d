"""Folding a run's submissions and failures into the coverage matrix, inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audit_mcp.core.models import RequeuedTask
from audit_mcp.store.records import CellBatch, CellKind, CellState, CellUpdate, PacketRow, RunCell, RunRow, Verdict
from audit_mcp.store.tx import Tx

INVALID_RESULTS = "invalid_results"
"""The failure kind of a packet whose results file was refused when its run was merged."""
_REASON_CHARS = {INVALID_RESULTS: 1500}  # the next prompt quotes a refused file's errors, so keep them whole


# A packet the scheduler told the host not to launch (it could not be admitted): requeued, not an attempt.
HELD = "held"


@dataclass
class IngestOutcome:
    merged: int = 0
    failed: int = 0
    covered: int = 0
    requeued: list[RequeuedTask] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)


def merge_parts(
    results: Sequence[Mapping[str, Any]], usage: Any, kinds: Mapping[str, str], files: Iterable[str]
) -> dict[str, Any]:
    """What merging needs of an accepted submission, kept beside it when it is accepted so that the merge
    never decodes the texts it does not use: the ids of the review tasks reviewed with nothing more to record
    (no reason, finding or lead verdict), every other result whole and in order, the usage, and the files
    the packet's tasks cover (which the merge checks again). ``kinds`` gives each task's cell kind. A stored
    payload (``{"results", "usage"}``) reads as parts with no plain ids and no files named."""
    plain: list[str] = []
    rest: list[Mapping[str, Any]] = []
    for result in results:
        if (
            result["status"] == "reviewed"
            and kinds.get(result["task_id"]) == CellKind.REVIEW
            and result.get("reason") is None
            and not result.get("findings")
            and not result.get("leads")
            and not result.get("earlier")
        ):
            plain.append(result["task_id"])
        else:
            rest.append(result)
    return {"reviewed": plain, "results": rest, "usage": usage, "files": sorted(set(files))}


def ingest_run(
    tx: Tx,
    audit_id: int,
    run: RunRow,
    packets: Sequence[PacketRow],
    failed: Mapping[str, tuple[str, str]],
    max_attempts: int,
    now: str,
    submissions: Mapping[str, Mapping[str, Any]] | None = None,
) -> IngestOutcome:
    """Accepted submissions mark their cells; everything else is requeued, or failed past the retry budget.

    ``failed`` gives, for every packet of the run without a submission, its failure kind and the error text;
    ``submissions`` the merge parts (``merge_parts``) of the run's accepted submissions by packet id (read
    here when not given). A cell plainly reviewed is written from its task id alone; the cells the merge
    reads (those of other results and of failed packets) are read in one query, and all are written back in
    one batch.
    """
    out = IngestOutcome()
    signatures: set[str] = set()
    accepted = tx.run_merge_parts(run.run_id) if submissions is None else submissions
    # The tasks of the packets without a submission (to requeue), read only when there are any.
    task_ids = tx.run_task_ids(run.run_id) if any(p.packet_id not in accepted for p in packets) else {}
    wanted = [r["task_id"] for p in packets if p.packet_id in accepted for r in accepted[p.packet_id]["results"]]
    wanted += [t for p in packets if p.packet_id not in accepted for t in task_ids.get(p.packet_id, [])]
    cells = tx.run_cells(audit_id, wanted) if wanted else {}
    batches: list[CellBatch] = []
    updates: list[CellUpdate] = []
    states: list[tuple[str, str]] = []
    for packet in packets:
        submission = accepted.get(packet.packet_id)
        if submission is not None:
            out.merged += 1
            states.append((packet.packet_id, "merged"))
            plain = submission.get("reviewed", ())
            batches.append(CellBatch(plain, CellState.REVIEWED, run.run_id, packet.packet_id))
            out.covered += len(plain)
            for result in submission["results"]:
                cell = cells[result["task_id"]]
                if result["status"] == "could_not_review":
                    why = f"could not review: {result.get('reason', '')}"
                    out.requeued.append(_requeue(updates, cell, max_attempts, why))
                    continue
                state = CellState.REVIEWED if result["status"] == "reviewed" else CellState.NOT_APPLICABLE
                updates.append(CellUpdate(cell.task_id, state, run.run_id, packet.packet_id, result.get("reason")))
                out.covered += 1
                if cell.kind != CellKind.REVIEW:
                    _record_opinion(tx, audit_id, cell, packet.packet_id, result, now)
                for finding in result.get("findings", []):
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
        states.append((packet.packet_id, "failed"))
        if kind == "auth_or_config":
            tx.set_blocker(
                audit_id,
                f"a subagent failed with an authentication or configuration error, which a "
                f"retry cannot fix: {text[:500]}. Fix it, then call next_step with retry_blocked=true "
                "(on the command line: next-step --retry-blocked, or run --retry-blocked).",
            )
        for task_id in task_ids.get(packet.packet_id, []):
            why = f"{kind}: {text[: _REASON_CHARS.get(kind, 200)]}"
            out.requeued.append(_requeue(updates, cells[task_id], max_attempts, why, attempt=kind != HELD))
    tx.set_packet_states(states)
    tx.update_cells(audit_id, updates, now, batches)
    if packets and out.failed == len(packets) and len(signatures) == 1:
        _stop_on_repeat(tx, audit_id, run, signatures.pop())
    return out


def _record_opinion(tx: Tx, audit_id: int, cell: RunCell, packet_id: str, result: Mapping[str, Any], now: str) -> None:
    """A context task's threat model, or a verify task's verdict, into the store (review tasks have neither)."""
    if cell.kind == CellKind.CONTEXT and result.get("threat_model"):
        tx.put_threat_model(
            audit_id,
            task_id=cell.task_id,
            packet_id=packet_id,
            origin=f"context packet {packet_id}",
            payload=result["threat_model"],
            now=now,
        )
    elif cell.kind == CellKind.VERIFY and cell.subject:
        answer = {k: v for k, v in result.items() if k not in ("task_id", "status")}
        tx.insert_finding_verdict(
            audit_id, task_id=cell.task_id, subject=cell.subject, packet_id=packet_id, payload=answer
        )


def _requeue(
    updates: list[CellUpdate], cell: RunCell, max_attempts: int, why: str, *, attempt: bool = True
) -> RequeuedTask:
    """Back to the queue, or failed past the retry budget; ``attempt`` False for work never tried (held back)."""
    attempts = cell.attempts + (1 if attempt else 0)
    state = CellState.FAILED if attempts >= max_attempts else CellState.PENDING
    reason = why if state is CellState.PENDING else f"gave up after {attempts} attempt(s); last: {why}"
    updates.append(CellUpdate(cell.task_id, state, None, None, reason, attempts))
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
            "again would loop. Fix the cause, then call next_step with retry_blocked=true "
            "(on the command line: next-step --retry-blocked, or run --retry-blocked).",
        )
