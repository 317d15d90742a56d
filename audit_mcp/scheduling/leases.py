"""Packet leases: a packet handed to a subagent is held until its lease ends, then returns to the queue.

Every packet of a run is leased when the run is dispatched, for ``lease_seconds`` of the session config.
A packet still without an accepted submission when its lease has ended is expired: the next ``next_step``
merges the run (keeping every accepted submission) and reports the expired packets as failed, so their
tasks return to the queue and are handed out again under new packet ids. A late submission for such a
superseded packet is refused with the id of the packet that now holds its tasks.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from audit_mcp.store.records import RunRow
from audit_mcp.store.tx import Tx


def lease_end(dispatched_at: datetime, lease_seconds: int) -> datetime:
    return dispatched_at + timedelta(seconds=lease_seconds)


def expiry_text(lease_seconds: int) -> str:
    """The failure text recorded for an expired packet; the re-issued packet's prompt quotes it."""
    return (
        f"lease expired: no accepted submission within {lease_seconds} s of dispatch (the subagent stopped, "
        "was lost with the host's context, or is still working)"
    )


def expired_failures(tx: Tx, run_id: str, now: str, lease_seconds: int) -> list[dict[str, str]]:
    """The ``failures`` argument of merge_and_ingest for the run's expired packets."""
    return [{"packet_id": p, "error": expiry_text(lease_seconds)} for p in tx.expired_packet_ids(run_id, now)]


def superseded_message(tx: Tx, run: RunRow, packet_id: str) -> str:
    """Why a submission for a packet of a merged run is refused, naming the packet(s) that hold its tasks now."""
    holders = tx.assigned_packets(run.audit_id, tx.packet_task_ids(packet_id))
    current = next((r.run_id for r in tx.runs(run.audit_id, plan=False) if r.state == "open"), None)
    if holders:
        return (
            f"run {run.run_id} is finished (merged), so packet {packet_id} is superseded: the open run is "
            f"{current} and its tasks are now held by packet {', '.join(holders)}. Do not submit again under the "
            "old id; the current packet's prompt says what to review"
        )
    hint = (
        f"the open run is {current}; its dispatch plan names the packet that now holds these tasks"
        if current
        else "call next_step to get the current work"
    )
    return f"run {run.run_id} is finished (merged), so packet {packet_id} is superseded; {hint}"
