"""A forecast recorded in the store is the forecast a fresh packing gives: the one a dispatch records for the
run after its own and the one a forecast records for other processes, on audits with chunked files, import
neighbours, several lens sets and requeued cells, at several budgets and run sizes, on SQLite and
PostgreSQL; the command line reads it too. A host's merge forecasts the next run, so the views after it pack
nothing; one that settles its whole run carries what its dispatch recorded instead of packing. A record
holds only at the queue generation it was made at."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.store.backends import Store, open_store
from audit_mcp.store.identity import RepoIdentity
from audit_mcp.usecases.service import AuditService
from tests.test_forecast_memo import count_packings
from tests.test_implicit_cells import REVIEW_ONLY
from tests.test_queue_units import _answer, _repository

IDENTITY = RepoIdentity("name:forecast-test", "audit name 'forecast-test'")


def _views(service: AuditService) -> tuple[dict[str, Any], dict[str, Any]]:
    return service.quota().forecast, service.status().forecast or {}


def _fresh(root: Path, packings: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The forecasts of a packing made now: every record dropped (a write, so the queue's generation moves
    too), then a new service, which packs."""
    service = AuditService(root)
    with service.store.write() as tx:
        tx.conn.execute("DELETE FROM forecasts")
    before = len(packings)
    views = _views(AuditService(root))
    assert len(packings) == before + 1, "no record left: the forecast was packed"
    return views


@pytest.mark.parametrize(("budget", "run"), [(4000, 3), (5000, 2), (9000, 1)], ids=["4k-3", "5k-2", "9k-1"])
def test_the_forecast_recorded_at_a_dispatch_or_a_forecast_is_a_fresh_packings(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch, budget: int, run: int
) -> None:
    root = tmp_path / "repo"
    _repository(root)
    (root / ".audit-mcp.toml").write_text(f"max_packet_tokens = {budget}\nmax_packets_per_run = {run}\n" + REVIEW_ONLY)
    packings = count_packings(monkeypatch)
    service = AuditService(root)
    for rounds in range(3):
        step = service.next_step({"can_dispatch_subagents": True})
        assert step.step_kind == "dispatch_review", (rounds, step.step_kind, step.reason)
        plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
        # The first forecasts after the dispatch, in this process and a fresh one: read from what it recorded.
        before = len(packings)
        recorded = _views(service)
        assert _views(AuditService(root)) == recorded
        assert len(packings) == before, "the dispatch recorded the run after its own"
        quota = [sys.executable, "-m", "audit_mcp", "quota", "--root", str(root)]
        cli = subprocess.run(quota, capture_output=True, text=True, check=True)
        assert json.loads(cli.stdout)["forecast"] == recorded[0]
        assert len(packings) == before
        assert _fresh(root, packings) == recorded
        # The fresh packing was recorded in turn: another process reads it.
        before = len(packings)
        assert _views(AuditService(root)) == recorded and len(packings) == before
        # Some tasks unreviewed, the other packets never submitted: the merge puts cells back in the queue
        # (rows beside the units they came from), and the next forecast packs them.
        first = plan["packets"][0]
        receipt = service.submit_packet(plan["run_id"], first["packet_id"], _answer(first, 1 + rounds))
        assert receipt.accepted, receipt.errors
        summary = service.merge_and_ingest(plan["run_id"], [])
        # A merge forecasts the next run once it has committed: the views after it, in this process, in a
        # fresh one and on the command line, pack nothing, and show what a fresh packing gives. (A shared
        # store merges once every packet is in: there this merge only records and waits.)
        before = len(packings)
        merged = _views(service)
        assert _views(AuditService(root)) == merged, "the merge recorded the next run in the store"
        cli = subprocess.run(quota, capture_output=True, text=True, check=True)
        assert json.loads(cli.stdout)["forecast"] == merged[0]
        assert summary.waiting_packets or len(packings) == before, "the merge forecast the next run"
        assert _fresh(root, packings) == merged
    assert rounds == 2, "three runs dispatched and merged"


def test_a_record_holds_at_its_generation_only_and_recording_keeps_the_generations(
    store_url: str, tmp_path: Path
) -> None:
    store: Store = open_store(None if store_url == "sqlite" else store_url, tmp_path / "artifacts", lambda: IDENTITY)
    try:
        with store.read() as tx:
            generation, queue = tx.generation(), tx.queue_generation()[1]
        assert store.aside(lambda tx: tx.record_forecast(7, "k", queue, '{"at": 1}'))
        with store.read() as tx:
            assert tx.generation() == generation and tx.queue_generation()[1] == queue, "derived data: no raise"
            assert tx.recorded_forecast(7, "k", queue) == '{"at": 1}'
            assert tx.recorded_forecast(7, "k", queue + 1) is None and tx.recorded_forecast(7, "other", queue) is None
        with store.write() as tx:  # a write that moves the queue records for the generation it commits
            tx.record_forecast(7, "k", tx.committed_queue_generation(), '{"at": 2}')
        with store.read() as tx:
            assert tx.queue_generation()[1] == queue + 1
            assert tx.recorded_forecast(7, "k", queue + 1) == '{"at": 2}'
            assert tx.recorded_forecast(7, "k", queue) is None
        # An older record written late never replaces a newer one.
        assert store.aside(lambda tx: tx.record_forecast(7, "k", queue, '{"at": 1}'))
        with store.read() as tx:
            assert tx.recorded_forecast(7, "k", queue + 1) == '{"at": 2}'
        # Recording never waits for a writer: while one holds the store, nothing is recorded.
        with store.write() as tx:
            tx.record_forecast(8, "k", tx.committed_queue_generation(), "{}")
            assert not store.aside(lambda tx: tx.record_forecast(7, "late", queue + 1, "{}"))
        with store.read() as tx:
            assert tx.recorded_forecast(7, "late", queue + 1) is None
    finally:
        store.close()


def _reviewed(packet: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "task_id": t["task_id"],
            "status": "reviewed",
            "findings": [],
            "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}: each path "
            "argument is joined under /srv and read; no input reaches a shell, a query or a template.",
        }
        for t in packet["tasks"]
    ]


def _with_a_finding(packet: dict[str, Any]) -> list[dict[str, Any]]:
    """``_reviewed``, with a finding (below the verification threshold) on the first module the packet holds."""
    results = _reviewed(packet)
    for task, result in zip(packet["tasks"], results, strict=True):
        if task["file"].startswith("pkg/m") and task["start_line"] == 1:
            result["findings"] = [
                {
                    "title": "A caller's path is joined under /srv without a check",
                    "category": "path-traversal",
                    "severity": "medium",
                    "confidence": "medium",
                    "file": task["file"],
                    "start_line": 6,
                    "end_line": 6,
                    "evidence": "return open(os.path.join('/srv', path)).read()",
                    "description": "A path with .. segments reads files outside /srv.",
                    "recommendation": "Resolve the joined path and refuse one outside /srv.",
                }
            ]
            result["summary"] = result["summary"].replace("no input reaches", "the path is unchecked; no input reaches")
            break
    return results


def test_a_merge_that_settles_its_whole_run_carries_the_record_its_dispatch_made(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every task of the run reviewed, none requeued, no file changed: the next run packs as it did when the
    run was dispatched, so the merge packs nothing and the views after it show what a fresh packing gives."""
    root = tmp_path / "repo"
    _repository(root)
    (root / ".audit-mcp.toml").write_text("max_packet_tokens = 4000\nmax_packets_per_run = 2\n" + REVIEW_ONLY)
    packings = count_packings(monkeypatch)
    service = AuditService(root)
    for rounds in range(4):  # the Dockerfile's lenses, then pkg/m00.py's
        step = service.next_step({"can_dispatch_subagents": True})
        assert step.step_kind == "dispatch_review", (rounds, step.step_kind, step.reason)
        plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
        for n, packet in enumerate(plan["packets"]):
            answer = _with_a_finding(packet) if rounds == 2 else _reviewed(packet)  # findings leave sizes alone
            receipt = service.submit_packet(plan["run_id"], packet["packet_id"], answer)
            assert receipt.accepted, receipt.errors
            # Between waves the host asks what to launch next: that records nothing the next run reads.
            launched = [p["packet_id"] for p in plan["packets"][: n + 1]]
            assert service.plan_status(plan["run_id"], [], launched).failures_recorded == 0
        before = len(packings)
        summary = service.merge_and_ingest(plan["run_id"], [])
        assert (summary.packets_failed, summary.tasks_requeued, summary.waiting_packets) == (0, 0, 0), summary
        assert len(packings) == before, "the merge packed the next run again"
        assert service.status().findings_by_severity["medium"] == (rounds >= 2), "the finding was merged"
        merged = _views(service)
        assert _views(AuditService(root)) == merged and len(packings) == before
        assert merged[0]["packets"] > 0, "a next run is left to forecast"
        assert _fresh(root, packings) == merged
    # A merge that puts a task back in the queue changes the next run: it packs, and shows the fresh packing.
    step = service.next_step({"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    for packet in plan["packets"]:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], _answer(packet, 1)).accepted
    before = len(packings)
    summary = service.merge_and_ingest(plan["run_id"], [])
    assert summary.tasks_requeued > 0 and len(packings) == before + 1
    assert _fresh(root, packings) == _views(service)
