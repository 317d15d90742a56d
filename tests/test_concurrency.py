"""Many processes submitting at once to one artifacts directory lose nothing and corrupt nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import first_review

WORKERS = Path(__file__).with_name("workers.py")
PROCESSES = 16


def _small_packets(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text("max_packet_tokens = 4000\n")


def test_sixteen_processes_and_cli_calls_submitting_at_once_lose_nothing(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, store_url: str
) -> None:
    _small_packets(repo)
    service = AuditService(repo)
    step = first_review(service)
    plan: dict[str, Any] = json.loads(Path(step.artifact_paths["plan"]).read_text())
    packets = plan["packets"]
    assert len(packets) >= 2 * PROCESSES, "the stress needs more packets than processes"
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    expected_findings = 0
    for packet in packets:
        results = reviewer.results(packet)
        expected_findings += sum(len(r["findings"]) for r in results)
        (results_dir / f"{packet['packet_id']}.json").write_text(json.dumps(results))
    ids = [p["packet_id"] for p in packets]
    # Each worker takes its share, plus one packet of its neighbour's share, so the same packet is written
    # by two processes at once; the CLI calls repeat a few more.
    shares = [ids[i::PROCESSES] for i in range(PROCESSES)]
    commands = [
        [
            sys.executable,
            str(WORKERS),
            "submit",
            str(repo),
            plan["run_id"],
            str(results_dir),
            *share,
            shares[(i + 1) % PROCESSES][0],
        ]
        for i, share in enumerate(shares)
    ]
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    commands += [
        [
            exe,
            "submit-packet",
            "--root",
            str(repo),
            "--run-id",
            plan["run_id"],
            "--packet-id",
            packet_id,
            "--results",
            str(results_dir / f"{packet_id}.json"),
        ]
        for packet_id in ids[:4]
    ]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    accepted: set[str] = set()
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        if '"accepted": true' in out:
            accepted.add(json.loads(out)["packet_id"])
        accepted.update(line.split()[1] for line in out.splitlines() if line.startswith("accepted "))
    assert accepted == set(ids)

    with service.store.read() as tx:
        assert tx.submitted_packet_ids(plan["run_id"]) == set(ids)
    merged = subprocess.run(
        [exe, "merge-and-ingest", "--root", str(repo), "--run-id", plan["run_id"]],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    summary = json.loads(merged.stdout)
    assert summary["packets_merged"] == len(ids) and summary["packets_failed"] == 0
    # The review is in; its four critical and high findings now wait for a verifier.
    assert summary["completeness"] == "unknown" and summary["verifications_planned"] == 4
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        assert tx.cell_counts_by_kind(audit.audit_id)["review"] == {"reviewed": sum(len(p["tasks"]) for p in packets)}
        assert len(tx.findings(audit.audit_id)) == expected_findings
    _verify_at_once(service, reviewer, tmp_path / "verdicts")
    if store_url == "sqlite":
        db = sqlite3.connect(service.artifacts_dir / "audit.sqlite3")
        try:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            db.close()
    assert service.next_step().step_kind == "present_report"


def _verify_at_once(service: AuditService, reviewer: ScriptedReviewer, results_dir: Path) -> None:
    """Every verifier packet submitted by two processes at once, and each process racing with the next."""
    step = service.next_step({})
    plan: dict[str, Any] = json.loads(Path(step.artifact_paths["plan"]).read_text())
    assert plan["packet_kind"] == "verify" and len(plan["packets"]) >= 2
    results_dir.mkdir()
    ids = [p["packet_id"] for p in plan["packets"]]
    for packet in plan["packets"]:
        (results_dir / f"{packet['packet_id']}.json").write_text(json.dumps(reviewer.results(packet)))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKERS),
                "submit",
                str(service.root),
                plan["run_id"],
                str(results_dir),
                *ids[i:],
                *ids[:i],
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(len(ids))
        for _ in range(2)
    ]
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outcomes += [line.split()[:3] for line in out.splitlines()]
    assert {packet for state, packet, _ in outcomes if state == "accepted"} == set(ids)
    assert sum(1 for state, _, new in outcomes if state == "accepted" and new == "new") == len(ids)
    summary = service.merge_and_ingest(plan["run_id"], [])
    assert summary.packets_merged == len(ids) and summary.completeness == "complete"
    tasks = sum(len(p["tasks"]) for p in plan["packets"])
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        assert len(tx.finding_verdicts(audit.audit_id)) == tasks == 4
