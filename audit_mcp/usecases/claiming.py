"""Claims across hosts: in a shared store, each host reviews only the packets it holds.

Every host that calls ``next_step`` on a run in flight is handed packets nobody else holds, claimed
atomically, up to as many as it runs at once. A claim has a lease (``[shared] claim_lease_seconds``)
that the host renews on every call it makes and, while it serves, from a background heartbeat; a
claim whose lease lapsed without a submission goes back to the run's queue, to be claimed again as
the packet's next attempt. A host with nothing to claim while others still work is told to wait. A
host is this machine and checkout (``AUDIT_MCP_HOST_ID`` overrides it). SQLite keeps the
one-host behaviour: its runs are leased whole at dispatch.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from audit_mcp.core.errors import AuditError
from audit_mcp.core.fs import write_atomic
from audit_mcp.store.claims import Claim
from audit_mcp.usecases.workspace import Workspace, iso

HOST_ENV = "AUDIT_MCP_HOST_ID"


def shared(ws: Workspace) -> bool:
    return ws.store.dialect == "postgresql"


def host_id(ws: Workspace) -> str:
    return os.environ.get(HOST_ENV, "").strip()[:200] or f"{socket.gethostname()}:{ws.root}"


@dataclass
class Holding:
    """What the run looks like to one host after it claimed: its packets, and who holds the rest."""

    mine: list[str] = field(default_factory=list)
    claimed_now: list[str] = field(default_factory=list)
    others: dict[str, int] = field(default_factory=dict)  # host -> packets it holds unanswered
    unclaimed: int = 0
    earliest_lapse: str | None = None


def take(ws: Workspace, run_id: str, capacity: int) -> Holding:
    """Release lapsed claims, renew this host's, and claim packets up to ``capacity`` held at once."""
    # The prompt writers, for a host taking packets in a shared store: the submission, which asks only
    # whether the store is shared and who holds a packet, loads none of them.
    from audit_mcp.usecases.packet_render import render_packets

    holding = _take(ws, run_id, capacity, wait=False)
    if not holding.mine and (holding.unclaimed or not holding.others):
        # Every free packet was being claimed by a transaction not committed yet (perhaps this host's own
        # other process): wait for those claims and look again, so no host is told to wait for nobody.
        holding = _take(ws, run_id, capacity, wait=True)
    fresh = holding.claimed_now
    plan_path = ws.plan_path(run_id)
    if not plan_path.is_file():  # another host dispatched the run: this host's copy of its plan
        with ws.store.read() as tx:
            dispatched = tx.run(run_id)
        if dispatched is not None:
            write_atomic(plan_path, json.dumps(dispatched.plan) + "\n")
    due = [p for p in holding.mine if p in fresh or not ws.packet_prompt_path(run_id, p).is_file()]
    if due:  # rendered together: what the prompts share (the run's prefix, files and edges) is read once
        with ws.store.read() as tx:
            texts = render_packets(ws, tx, run_id, due)
        for packet_id, text in texts.items():
            write_atomic(ws.packet_prompt_path(run_id, packet_id), text)
    if holding.mine:
        heartbeat(ws).watch(run_id)
    return holding


def _take(ws: Workspace, run_id: str, capacity: int, *, wait: bool) -> Holding:
    me = host_id(ws)
    lease = ws.config().shared.claim_lease_seconds
    now = ws.clock()
    until = iso(now + timedelta(seconds=lease))
    with ws.store.claim() as tx:
        lapsed = tx.lapsed_claims(run_id, iso(now))
        tx.release_claims([c.packet_id for c in lapsed])
        run = tx.run(run_id, plan=False)
        for c in lapsed:
            tx.log(
                now=iso(now),
                audit_id=run.audit_id if run else None,
                actor="engine",
                action="claim_lapsed",
                detail=f"{c.packet_id}: the claim of host {c.holder} (attempt {c.attempt}) lapsed at "
                f"{c.lease_expires_at} without a submission; the packet is back in the queue",
                outcome="released",
            )
        tx.renew_claims(run_id, me, until)
        submitted = tx.submitted_packet_ids(run_id)
        held = [c for c in tx.claims(run_id) if _open(c, submitted) and c.holder == me]
        fresh = tx.claim_packets(run_id, me, iso(now), until, capacity - len(held), wait=wait)
        holding = _holding(me, tx.claims(run_id), tx.submitted_packet_ids(run_id))
        holding.claimed_now = fresh
    return holding


def _open(c: Claim, submitted: set[str]) -> bool:
    return c.state == "issued" and c.packet_id not in submitted


def _holding(me: str, claims: list[Claim], submitted: set[str]) -> Holding:
    holding = Holding()
    for c in claims:
        if not _open(c, submitted):
            continue
        if c.holder is None:
            holding.unclaimed += 1
        elif c.holder == me:
            holding.mine.append(c.packet_id)
        else:
            holding.others[c.holder] = holding.others.get(c.holder, 0) + 1
            if c.lease_expires_at and (holding.earliest_lapse is None or c.lease_expires_at < holding.earliest_lapse):
                holding.earliest_lapse = c.lease_expires_at
    return holding


def renew(ws: Workspace, run_id: str) -> None:
    """Extend this host's claims on the run (every call a host makes counts as a sign of life)."""
    until = iso(ws.clock() + timedelta(seconds=ws.config().shared.claim_lease_seconds))
    with ws.store.claim() as tx:
        tx.renew_claims(run_id, host_id(ws), until)


def holder_message(claim: Claim, me: str) -> str:
    """Why a submission from ``me`` for a packet another host holds now is refused."""
    return (
        f"packet {claim.packet_id} is held by host {claim.holder} in attempt {claim.attempt} (claimed at "
        f"{claim.claimed_at}, lease until {claim.lease_expires_at}), not by this host ({me}): either this host's "
        "claim lapsed and the packet went to that host, or it was never this host's. Nothing was recorded; do not "
        "submit it again, and call next_step for this host's own packets"
    )


class Heartbeat:
    """Renews a serving host's claims in the background, every third of the lease, while it holds any."""

    def __init__(self, ws: Workspace) -> None:
        self._ws = ws
        self._runs: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, run_id: str) -> None:
        with self._lock:
            self._runs.add(run_id)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._beat, name="audit-mcp-claims", daemon=True)
                self._thread.start()

    def _beat(self) -> None:
        interval = max(1.0, self._ws.config().shared.claim_lease_seconds / 3)
        while not self._stop.wait(interval):
            with self._lock:
                runs = sorted(self._runs)
            for run_id in runs:
                try:
                    renew(self._ws, run_id)
                except AuditError:
                    continue  # the store is unreachable for now: the next beat tries again

    def stop(self) -> None:
        self._stop.set()


_BEATS: dict[Path, Heartbeat] = {}
_BEATS_LOCK = threading.Lock()


def heartbeat(ws: Workspace) -> Heartbeat:
    with _BEATS_LOCK:
        return _BEATS.setdefault(ws.artifacts_dir, Heartbeat(ws))
