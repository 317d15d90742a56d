"""Four hosts, each with its own checkout path and eight reviewers at once, finish one audit on PostgreSQL:
every cell reviewed exactly once, no submission lost, no packet held by two hosts, and a host killed
mid-run loses nothing (its leases lapse and the other hosts finish its packets)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from audit_mcp.usecases.service import AuditService
from benchmarks.multi_host import checkout, host_config, make_repo

HOSTS = 4
REVIEWERS = 8
ROOT = Path(__file__).resolve().parent.parent


def test_four_hosts_finish_one_audit_and_a_killed_host_loses_nothing(tmp_path: Path, pg_url: str) -> None:
    origin = make_repo(tmp_path / "origin", files=64)
    roots = [checkout(origin, tmp_path / f"machine-{n}" / "work" / "app", lease_seconds=3) for n in range(HOSTS)]
    killed = roots[-1]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.multi_host", "host", str(root), pg_url, str(REVIEWERS), "0.05"]
            + (["--die-after", "3"] if root == killed else []),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for root in roots
    ]
    events: list[dict[str, Any]] = []
    for root, proc in zip(roots, procs, strict=True):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == (9 if root == killed else 0), err
        events += [json.loads(line) for line in out.splitlines()]
    done = [e for e in events if e["event"] == "done"]
    assert len(done) == HOSTS - 1 and {e["completeness"] for e in done} == {"complete"}

    accepted = [e for e in events if e["event"] == "accepted" and not e["duplicate"]]
    by_killed = {e["packet_id"] for e in accepted if e["host"] == str(killed)}
    assert len(by_killed) == 3, "the killed host died after its third accepted submission"
    assert all(n == 1 for n in Counter(e["packet_id"] for e in accepted).values())
    tasks = Counter(t for e in accepted for t in e["tasks"])
    assert all(n == 1 for n in tasks.values()), "a cell was reviewed twice"

    # No packet held by two hosts: one handed to a second host was the killed host's, and never answered by it.
    holders: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e["event"] == "handed":
            for packet_id in e["packets"]:
                holders[packet_id].append(e["host"])
    for packet_id, hosts in holders.items():
        assert len(set(hosts)) == len(hosts), f"{packet_id} handed twice to one host"
        if len(hosts) > 1:  # (the lists are in each host's order, not in time)
            live = [h for h in hosts if h != str(killed)]
            assert len(live) == 1 and len(hosts) == 2 and packet_id not in by_killed, (packet_id, hosts)
    assert any(len(h) > 1 for h in holders.values()), "the killed host's claims were never taken over"
    assert len({h for hs in holders.values() for h in hs}) == HOSTS  # every host did part of the work

    service = AuditService(roots[0], store=pg_url, config_path=host_config(roots[0]))
    try:
        with service.store.read() as tx:
            audit = tx.current_audit()
            assert audit is not None and tx.audit_ids() == [audit.audit_id]  # one audit for four checkouts
            cells = tx.cells(audit.audit_id)
            assert {c.state for c in cells} == {"reviewed"} and {c.task_id for c in cells} == set(tasks)
            for e in accepted:  # 0 lost: every accepted submission is in the store
                assert tx.submission(e["packet_id"]) is not None, e["packet_id"]
    finally:
        service.store.close()
