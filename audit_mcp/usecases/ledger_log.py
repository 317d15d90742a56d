"""The run ledger as a record of work: a headless worker's life in one entry, and the whole ledger exported.

``audit-mcp run`` records each worker when it ends (``record_worker``): its packet, when it started and
ended, its exit status, the provider its packet was planned for, and the class of its failure when it
failed. ``audit-mcp ledger`` exports every entry, oldest first, as one JSON object a line (``export``),
each with the same leading fields whatever its action, so a reader can filter without knowing them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from audit_mcp.core.errors import NotFoundError
from audit_mcp.usecases.workspace import Workspace

WORKER_ACTION = "worker"
# The fields every exported line has (None where an entry does not say), in this order; the rest of an entry's
# data follows under "data".
LINE_FIELDS = (
    "entry_id",
    "at",
    "audit_id",
    "actor",
    "action",
    "run_id",
    "packet_id",
    "worker",
    "started_at",
    "ended_at",
    "exit_status",
    "provider",
    "failure_class",
    "outcome",
    "detail",
)
_FROM_DATA = ("run_id", "packet_id", "worker", "started_at", "ended_at", "exit_status", "provider", "failure_class")


def record_worker(
    ws: Workspace,
    run_id: str,
    packet_id: str,
    *,
    worker: str,
    started_at: str,
    ended_at: str,
    exit_status: int | str | None,
    outcome: str,
    failure_class: str | None = None,
    usage: Mapping[str, float] | None = None,
    detail: str = "",
) -> None:
    """One ledger entry for a worker that ended: ``exit_status`` is its exit code (negative: the signal that
    ended it), or ``"timeout"`` when it was killed for running past the timeout."""
    with ws.store.write() as tx:
        tx.records_answer_only()  # the log only: forecasts of the next run hold
        run = tx.run(run_id, plan=False)
        context = tx.run_context(run_id) or {}
        data: dict[str, Any] = {
            "run_id": run_id,
            "packet_id": packet_id,
            "worker": worker,
            "started_at": started_at,
            "ended_at": ended_at,
            "exit_status": exit_status,
            "provider": context.get("provider"),
            "model": context.get("model"),
            "failure_class": failure_class,
        }
        if usage:
            data["usage"] = dict(usage)
        tx.log(
            now=ended_at,
            audit_id=run.audit_id if run is not None else None,
            actor="headless",
            action=WORKER_ACTION,
            detail=detail or f"packet {packet_id}: worker {worker} ended ({outcome})",
            outcome=outcome,
            data=data,
        )


def export(ws: Workspace, audit_id: int | None = None) -> Iterator[dict[str, Any]]:
    """Every ledger entry (of audit ``audit_id``, or of all), oldest first, as the lines ``audit-mcp ledger``
    prints; ``NotFoundError`` where no audit was ever started, or for an audit this store does not hold."""
    ws.require_state()
    with ws.store.read() as tx:
        if audit_id is not None and audit_id not in tx.audit_ids():
            held = ", ".join(str(a) for a in tx.audit_ids()) or "none"
            raise NotFoundError(
                f"no audit {audit_id} in {ws.artifacts_dir} (its audits: {held}); pass one of them with --audit, "
                "or leave --audit out to export every audit's entries"
            )
        for entry in tx.ledger_entries(audit_id):
            yield line(entry)


def line(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger entry as an exported line: ``LINE_FIELDS`` first, the rest of its data under ``data``."""
    data = dict(entry.get("data") or {})
    out: dict[str, Any] = {name: entry.get(name) for name in LINE_FIELDS}
    for name in _FROM_DATA:
        out[name] = data.pop(name, None)
    out["data"] = data or None
    return out
