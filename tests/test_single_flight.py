"""One audit per root, whatever the concurrency; a run belongs to one audit.

Processes are released together through a FIFO: each imports the CLI, says it is ready, and blocks reading
the FIFO; once all are ready the test writes one byte per process in one go, and each runs its verb.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.errors import StateError
from audit_mcp.usecases import next_step as next_step_module
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import finish, run_id

PROCESSES = 8
_CHILD = """
import os, sys
from audit_mcp.surfaces.cli import main
print("ready", flush=True)
fd = os.open(sys.argv[1], os.O_RDONLY)
os.read(fd, 1)
sys.exit(main(sys.argv[2:]))
"""


def _released_together(fifo: Path, argv: list[str], count: int) -> list[subprocess.CompletedProcess[str]]:
    os.mkfifo(fifo)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(fifo), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    writer = os.open(fifo, os.O_WRONLY)  # the write end stays open until every process has its byte
    try:
        os.write(writer, b"g" * count)
        done = []
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        os.close(writer)
    return done


def _audits_and_runs(repo: Path) -> tuple[int, int]:
    """How many audits the store holds for this repository, and how many runs they have."""
    service = AuditService(repo)
    try:
        with service.store.read() as tx:
            ids = tx.audit_ids()
            return len(ids), sum(len(tx.runs(i, plan=False)) for i in ids)
    finally:
        service.store.close()


def _count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def test_processes_released_together_on_a_new_root_start_exactly_one_audit(
    repo: Path, tmp_path: Path, store_url: str
) -> None:
    argv = ["next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true"]
    results = _released_together(tmp_path / "go", argv, PROCESSES)
    for done in results:
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr and "IntegrityError" not in done.stderr
    steps = [json.loads(done.stdout) for done in results]
    assert {s["step_kind"] for s in steps} == {"dispatch_review"}
    assert len({s["run_id"] for s in steps}) == 1  # every caller follows the same run
    assert _audits_and_runs(repo) == (1, 1)


def test_a_new_audit_that_another_caller_started_meanwhile_is_joined_not_doubled(
    repo: Path, reviewer: ScriptedReviewer, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = AuditService(repo)
    step = finish(service, service.next_step({"can_dispatch_subagents": True}), reviewer.results)
    assert step.step_kind == "present_report"
    (repo / "app" / "extra.py").write_text("def added(x):\n    return x * 3\n")  # something new to review
    real = next_step_module._collect_results_files
    other: list[str | None] = []
    raced: list[bool] = []

    def racing(ws: Any) -> None:
        # Right after this caller took its answers, a second caller asks for a new audit too and gets there first.
        if not raced:
            raced.append(True)
            other.append(AuditService(repo).next_step({"can_dispatch_subagents": True}, new_audit=True).run_id)
        real(ws)

    monkeypatch.setattr(next_step_module, "_collect_results_files", racing)
    mine = service.next_step({"can_dispatch_subagents": True}, new_audit=True)
    assert other and mine.run_id == other[0]  # both follow the second audit's one run
    assert _count(repo / ".audit-mcp" / "audit.sqlite3", "audits") == 2


def _stale(repo: Path, reviewer: ScriptedReviewer) -> tuple[AuditService, dict[str, Any], dict[str, int]]:
    """Audit 1 with its run still open, and an audit 2 that replaced it (as a racing start once could)."""
    service = AuditService(repo)
    step = service.next_step({"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    with service.store.write() as tx:
        audit = tx.current_audit()
        assert audit is not None
        new_id = tx.create_audit(
            now=service.now(), root=str(repo), git_head=None, git_dirty=False, digest="x", lenses=audit.lenses
        )
        tx.insert_files(new_id, tx.files(audit.audit_id))
    service.next_step({"can_dispatch_subagents": True})  # audit 2 gets its own matrix and run
    with service.store.read() as tx:
        cells = tx.cell_counts(new_id)
    return service, plan, dict(cells)


def test_a_submission_for_a_run_of_a_superseded_audit_is_refused_naming_the_current_one(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service, plan, _ = _stale(repo, reviewer)
    packet = plan["packets"][0]
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
    assert not receipt.accepted
    message = receipt.errors[0].message
    assert receipt.errors[0].location == "/run_id"
    assert "belongs to audit 1" in message and "audit 2" in message and f"open run is {run_id(repo, 2, 1)}" in message


def test_a_merge_of_a_run_of_a_superseded_audit_is_refused_and_touches_no_cell_of_the_current_one(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service, plan, cells_before = _stale(repo, reviewer)
    with pytest.raises(StateError, match="belongs to audit 1, which audit 2 has replaced"):
        service.merge_and_ingest(plan["run_id"], [])
    with service.store.read() as tx:
        assert dict(tx.cell_counts(2)) == cells_before
        assert tx.run(plan["run_id"], plan=False).state == "open"  # type: ignore[union-attr]
