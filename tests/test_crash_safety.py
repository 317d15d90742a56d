"""SIGKILL at random moments of submit, merge and synthesis: the last committed state survives whole."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from audit_mcp.usecases.service import AuditService

WORKERS = Path(__file__).with_name("workers.py")
KILLS = 20


def _check_invariants(db_path: Path, accepted: set[str]) -> None:
    db = sqlite3.connect(db_path)
    db.row_factory = sqlite3.Row
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {r[0] for r in db.execute("SELECT packet_id FROM submissions")}
        assert accepted <= stored, f"accepted submissions lost: {sorted(accepted - stored)}"
        for audit_id, open_runs in db.execute("SELECT audit_id, SUM(state = 'open') FROM runs GROUP BY audit_id"):
            assert open_runs <= 1, f"audit {audit_id} has {open_runs} open runs"
        for run in db.execute("SELECT run_id, audit_id, state FROM runs").fetchall():
            packet_states = {r[0] for r in db.execute("SELECT state FROM packets WHERE run_id = ?", (run["run_id"],))}
            findings = db.execute("SELECT COUNT(*) FROM findings WHERE run_id = ?", (run["run_id"],)).fetchone()[0]
            assigned = db.execute(
                "SELECT COUNT(*) FROM cells WHERE run_id = ? AND state = 'assigned'", (run["run_id"],)
            ).fetchone()[0]
            verdicts = db.execute(
                "SELECT COUNT(*) FROM finding_verdicts v JOIN packets p ON p.packet_id = v.packet_id"
                " WHERE p.run_id = ?",
                (run["run_id"],),
            ).fetchone()[0]
            if run["state"] == "open":
                # Nothing of an unmerged run has reached the matrix: no finding, no verdict, no threat model.
                assert findings == 0 and verdicts == 0 and "merged" not in packet_states
                assert not db.execute(
                    "SELECT 1 FROM threat_models t JOIN packets p ON p.packet_id = t.packet_id"
                    " WHERE p.run_id = ? AND t.audit_id = ?",
                    (run["run_id"], run["audit_id"]),
                ).fetchone()
                continue
            # A merged run is merged whole: every packet settled, every submission's cells covered by it.
            assert assigned == 0 and packet_states <= {"merged", "failed"}
            for packet_id, payload in db.execute(
                "SELECT packet_id, payload FROM submissions WHERE run_id = ?", (run["run_id"],)
            ).fetchall():
                results: list[dict[str, Any]] = json.loads(payload)["results"]
                cells = {
                    r["task_id"]: (r["state"], r["packet_id"])
                    for r in db.execute(
                        "SELECT task_id, state, packet_id FROM cells WHERE packet_id = ? AND audit_id = ?",
                        (packet_id, run["audit_id"]),
                    )
                }
                assert all(cells[r["task_id"]] == ("reviewed", packet_id) for r in results)
                # Later audits carry these findings forward under their own audit id.
                kept = db.execute(
                    "SELECT COUNT(*) FROM findings WHERE packet_id = ? AND audit_id = ?", (packet_id, run["audit_id"])
                ).fetchone()[0]
                assert kept == sum(len(r.get("findings", [])) for r in results)
                # A merged verification answer is one verdict per task; a merged context answer, the threat model.
                judged = db.execute(
                    "SELECT COUNT(*) FROM finding_verdicts WHERE packet_id = ? AND audit_id = ?",
                    (packet_id, run["audit_id"]),
                ).fetchone()[0]
                assert judged == sum(1 for r in results if "rationale" in r)
                if any("threat_model" in r for r in results):
                    assert (
                        db.execute(
                            "SELECT packet_id FROM threat_models WHERE audit_id = ?", (run["audit_id"],)
                        ).fetchone()[0]
                        == packet_id
                    )
    finally:
        db.close()


def test_killing_the_process_at_random_moments_loses_nothing_and_the_audit_still_completes(
    repo: Path, answer_key: dict[str, Any]
) -> None:
    service = AuditService(repo)
    rng = random.Random(20261130)
    # One whole audit, uninterrupted, sets the time scale: the kills land from early in a worker's life
    # (still importing) to well inside its second or third audit, however fast this machine is.
    started = time.monotonic()
    warm = subprocess.run(
        [sys.executable, str(WORKERS), "drive", str(repo), "1"], capture_output=True, text=True, timeout=60
    )
    assert warm.returncode == 0, warm.stderr
    scale = time.monotonic() - started
    accepted = {line.split()[1] for line in warm.stdout.splitlines() if line.startswith("accepted ")}
    interrupted = 0
    for _ in range(KILLS):
        # The worker starts audit after audit and never stops by itself; the kill lands wherever it is.
        proc = subprocess.Popen(
            [sys.executable, str(WORKERS), "drive", str(repo), "1000"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            proc.wait(timeout=rng.uniform(0.5, 1.6) * scale)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            interrupted += 1
        out, err = proc.communicate(timeout=30)
        assert proc.returncode in (-signal.SIGKILL, 0), err
        accepted |= {line.split()[1] for line in out.splitlines() if line.startswith("accepted ")}
        _check_invariants(service.store.path, accepted)
    assert interrupted >= KILLS // 2
    kinds = {line.split()[2] for line in warm.stdout.splitlines() if line.startswith("accepted ")}
    assert kinds == {"context", "review", "verify"}, "an audit goes through all three kinds of packet"

    finish = subprocess.run(
        [sys.executable, str(WORKERS), "drive", str(repo), "1"], capture_output=True, text=True, timeout=60
    )
    assert finish.returncode == 0, finish.stderr
    _check_invariants(service.store.path, accepted)
    with service.store.read() as tx:
        audits = tx.conn.execute("SELECT COUNT(*) FROM audits WHERE synthesized_at IS NOT NULL").fetchone()[0]
    assert audits >= 3, "the kills should land inside several audits, not before the first step"
    step = service.next_step()
    assert step.step_kind == "present_report" and step.completeness == "complete"
    report = json.loads(service.report("json"))
    titles = json.dumps(report)
    assert all(issue["title"] in titles for issue in answer_key["issues"])
    # A later audit carries the verifications of the findings it carries, with its cells (content unchanged).
    assert report["threat_model"] is not None and sum(report["coverage"]["by_kind"]["verify"].values()) == 4
    assert set(report["coverage"]["by_kind"]["verify"]) <= {"reviewed", "carried"}
    assert {f["status"] for f in report["findings"] if f["severity"] in ("critical", "high")} == {"confirmed"}
