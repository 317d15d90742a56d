"""explain_task: one task's whole story: its file and lines, lens, attempts, packets, receipts, failures, why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audit_mcp.core.errors import NotFoundError, PathError
from audit_mcp.core.fs import normalize_relpath
from audit_mcp.core.operations import FileTask, FileTasks, TaskExplanation, TaskPacket
from audit_mcp.core.text import id_problem
from audit_mcp.store.records import Cell, CellState
from audit_mcp.usecases.workspace import Workspace

MAX_FINDINGS_LISTED = 20


def explain_task(ws: Workspace, task_id: str) -> TaskExplanation:
    """Everything the audit knows about ``task_id`` in the current audit."""
    if problem := id_problem("task_id", task_id):
        raise NotFoundError(problem)
    task_id = task_id.strip().upper()
    config = ws.config()
    with ws.store.read() as tx:
        audit = ws.require_audit(tx)
        cell = tx.cells_by_id(audit.audit_id, [task_id]).get(task_id)
        if cell is None:
            raise NotFoundError(
                f"task {task_id!r} is not in audit {audit.audit_id}; task ids look like T00012 and are listed in "
                "the dispatch plan (packets[].tasks[].task_id) and the report's gaps"
            )
        file = tx.file(audit.audit_id, cell.path)
        packets = tx.packets_of_task(audit.audit_id, task_id)
        submissions = {p.packet_id: (tx.submission_record(p.packet_id), tx.submission(p.packet_id)) for p in packets}
        failures = tx.failures_of_packets(audit.audit_id, [p.packet_id for p in packets])
        findings = tx.findings_of_task(audit.audit_id, task_id)
        requests = tx.requeues_of(audit.audit_id, task_id)
        holder = tx.run(cell.run_id, plan=False) if cell.run_id else None
        lease = tx.packet_lease(cell.packet_id) if cell.state == CellState.ASSIGNED and cell.packet_id else None
    shown = []
    for p in packets:
        record, submitted = submissions[p.packet_id]
        results = submitted[1]["results"] if submitted else []
        answer = next((r for r in results if r["task_id"] == task_id), None)
        shown.append(
            TaskPacket(
                packet_id=p.packet_id,
                run_id=p.run_id,
                state=p.state,
                prompt_path=p.prompt_path,
                prompt_exists=Path(p.prompt_path).is_file(),
                submitted_at=record["accepted_at"] if record else None,
                submitted_via=(f"file {record['origin']}" if record["origin"] else "call") if record else None,
                result=_answer(answer),
            )
        )
    why, action = _why(cell, config.max_attempts, holder.state if holder else None, lease)
    return TaskExplanation(
        task_id=task_id,
        audit_id=audit.audit_id,
        file=cell.path,
        start_line=cell.start_line,
        end_line=cell.end_line,
        lens=cell.lens,
        state=cell.state,
        attempts=cell.attempts,
        max_attempts=config.max_attempts,
        reason=cell.reason,
        file_info={
            "language": file.language if file else None,
            "line_count": file.line_count if file else None,
            "scope": file.scope if file else None,
            "skip_reason": file.skip_reason if file else None,
        },
        packets=shown,
        failures=failures,
        findings=[
            {k: f.get(k) for k in ("title", "severity", "start_line", "end_line", "category", "packet_id")}
            for f in findings[:MAX_FINDINGS_LISTED]
        ],
        requeue_requests=requests,
        why=why,
        next_action=action,
    )


def _answer(answer: dict[str, Any] | None) -> dict[str, Any] | None:
    if answer is None:
        return None
    return {
        "status": answer["status"],
        "summary": answer.get("summary"),
        "reason": answer.get("reason"),
        "findings": len(answer.get("findings", [])),
    }


def _why(cell: Cell, max_attempts: int, run_state: str | None, lease: str | None) -> tuple[str, str]:
    """Why the cell is where it is, and what someone may do about it."""
    requeue = f"`audit-mcp requeue --task {cell.task_id} --reason '...'` sends it back to review"
    match cell.state:
        case CellState.PENDING:
            tried = f" after {cell.attempts} failed attempt(s) of {max_attempts}" if cell.attempts else ""
            last = f"; last time: {cell.reason}" if cell.reason and cell.attempts else ""
            return (
                f"open: waiting for the next review run{tried}{last}",
                "Call next_step (or `audit-mcp run`): the next run hands it out.",
            )
        case CellState.ASSIGNED:
            until = f", leased until {lease}" if lease else ""
            return (
                f"open: handed out in packet {cell.packet_id} of run {cell.run_id} ({run_state or 'unknown'}){until}",
                "Wait for that packet's submission (or its results file), then merge the run; an expired lease "
                "hands the task out again.",
            )
        case CellState.REVIEWED | CellState.NOT_APPLICABLE:
            what = "reviewed" if cell.state == CellState.REVIEWED else f"not applicable ({cell.reason})"
            return f"closed: {what} by packet {cell.packet_id} of run {cell.run_id}", f"Nothing to do; {requeue}."
        case CellState.CARRIED:
            return f"closed: {cell.reason}", f"Nothing to do; {requeue}."
        case CellState.FAILED:
            return (
                f"closed as a gap: {cell.reason}",
                f"Fix the cause the failures name, then {requeue} with a fresh retry budget.",
            )
        case _:
            return f"closed as a gap: skipped ({cell.reason})", f"Nothing to do unless the skip was wrong; {requeue}."


def file_tasks(ws: Workspace, path: str) -> FileTasks:
    """Every task of ``path`` (repo-relative) in the current audit, in line and lens order, with its state."""
    try:
        rel = normalize_relpath(path)
    except PathError as exc:
        raise NotFoundError(str(exc)) from exc
    with ws.store.read() as tx:
        audit = ws.require_audit(tx)
        row = tx.file(audit.audit_id, rel)
        if row is None:
            raise NotFoundError(
                f"{rel!r} is not in audit {audit.audit_id}'s manifest; give the path relative to the repository "
                f"root ({ws.root}), as the report and the dispatch plans name files"
            )
        cells = [c for c in tx.cells(audit.audit_id) if c.path == rel]
        found = {c.task_id: len(tx.findings_of_task(audit.audit_id, c.task_id)) for c in cells}
    cells.sort(key=lambda c: (c.start_line, c.lens))
    tasks = [
        FileTask(
            task_id=c.task_id,
            lens=c.lens,
            start_line=c.start_line,
            end_line=c.end_line,
            state=str(c.state),
            attempts=c.attempts,
            packet_id=c.packet_id,
            reason=c.reason,
            findings=found[c.task_id],
        )
        for c in cells
    ]
    by_state: dict[str, int] = {}
    for task in tasks:
        by_state[task.state] = by_state.get(task.state, 0) + 1
    if row.scope != "review":
        action = f"{rel} is not reviewed: {row.skip_reason}."
    elif not tasks:
        action = f"{rel} has no task: no lens of this audit reads it."
    else:
        action = (
            "`audit-mcp explain-task TASK_ID` tells one task's whole story; `audit-mcp requeue --file` sends them back."
        )
    return FileTasks(
        audit_id=audit.audit_id,
        file=rel,
        scope=row.scope,
        skip_reason=row.skip_reason,
        tasks=tasks,
        by_state=by_state,
        next_action=action,
    )
