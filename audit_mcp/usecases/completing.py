"""Completions for the ids a host types into prompts and resource URIs: run, packet and task ids.

Each answer holds at most ``MAX_VALUES`` values (MCP's cap), says whether more match, and lists runs newest
first and packets and tasks in order. Before any audit there is nothing to complete.
"""

from __future__ import annotations

from audit_mcp.usecases.workspace import Workspace

MAX_VALUES = 100
KINDS = ("run_id", "packet_id", "task_id")


def complete(ws: Workspace, kind: str, prefix: str, run_id: str | None = None) -> tuple[list[str], bool]:
    """The ids of ``kind`` (one of ``KINDS``) that start with ``prefix``, and whether more match than are given;
    packet ids are those of ``run_id`` when given, else of the latest run."""
    with ws.store_if_any() as tx:
        audit = tx.current_audit() if tx is not None else None
        if tx is None or audit is None or kind not in KINDS:
            return [], False
        if kind == "task_id":
            found = tx.task_ids_starting(audit.audit_id, prefix, MAX_VALUES + 1)
        else:
            runs = sorted(tx.runs(audit.audit_id, plan=False), key=lambda r: r.seq, reverse=True)
            if kind == "run_id":
                found = [r.run_id for r in runs if r.run_id.startswith(prefix)]
            else:
                run = next((r for r in runs if r.run_id == run_id), None) if run_id else (runs[0] if runs else None)
                packets = tx.packets(run.run_id) if run is not None else []
                found = [x.packet_id for x in packets if x.packet_id.startswith(prefix)]
    return found[:MAX_VALUES], len(found) > MAX_VALUES
