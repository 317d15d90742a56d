"""The operator's verbs through the CLI: ingest-results, validate-results, explain-task, requeue, abandon,
cleanup, and the stage verbs intake, plan and synthesize."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.surfaces.cli import main
from audit_mcp.usecases import cleaning
from tests.conftest import ScriptedReviewer
from tests.driving import cli, past_context_json, run_id

NEXT = ("--host-can-dispatch-subagents", "true", "--host-max-active-subagents", "4")
RECEIPT_FIELDS = (
    "accepted",
    "run_id",
    "packet_id",
    "duplicate",
    "errors",
    "warnings",
    "tasks_covered",
    "findings_kept",
)


def _failing(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """A verb that fails: its exit code and its message on stderr (stdout stays empty)."""
    code = main(list(argv))
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err


def _start(repo: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The first review run's plan (the context run before it answered and merged)."""
    code, step = cli(capsys, "next-step", "--root", str(repo), *NEXT)
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    step = past_context_json(repo, step)
    return dict(json.loads(Path(step["artifact_paths"]["plan"]).read_text()))


def _finish(repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    """Answer every open packet through ingest-results on a batch folder, merge, until the report."""
    for _ in range(5):
        _, step = cli(capsys, "next-step", "--root", str(repo), *NEXT)
        if step["step_kind"] != "dispatch_review":
            break
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        batch = folder / plan["run_id"]
        batch.mkdir(parents=True)
        for packet in plan["packets"]:
            (batch / f"{packet['packet_id']}.json").write_text(json.dumps(reviewer.results(packet)))
        code, out = cli(capsys, "ingest-results", "--root", str(repo), "--batch-results-dir", str(batch))
        assert code == 0, out
        cli(capsys, "merge-and-ingest", "--root", str(repo), "--run-id", plan["run_id"])
    assert step["step_kind"] == "present_report", step


def test_ingest_results_records_a_file_named_by_its_packet_once(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _start(repo, capsys)
    packet = plan["packets"][0]
    path = tmp_path / f"{packet['packet_id']}.json"
    path.write_text(json.dumps({"results": reviewer.results(packet), "usage": {"seconds": 60}}))
    code, receipt = cli(capsys, "ingest-results", "--root", str(repo), "--results", str(path))
    assert code == 0 and receipt["accepted"] and not receipt["duplicate"], receipt
    code, again = cli(capsys, "ingest-results", "--root", str(repo), "--results", str(path))
    assert code == 0 and again["duplicate"] is True
    _, status = cli(capsys, "status", "--root", str(repo), "--json")
    assert next(r for r in status["runs"] if r["run_id"] == plan["run_id"])["submitted"] == 1
    assert any(f"ingested from file {path}" in e["detail"] for e in status["ledger"])


def test_ingest_results_refuses_what_submit_packet_refuses_and_names_unknown_packets(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _start(repo, capsys)
    batch = tmp_path / "batch"
    batch.mkdir()
    good, bad = plan["packets"][0], plan["packets"][1]
    (batch / f"{good['packet_id']}.json").write_text(json.dumps(reviewer.results(good)))
    (batch / f"{bad['packet_id']}.json").write_text("[]")
    (batch / "A9-R9-P99.json").write_text("[]")
    (batch / "notes.txt").write_text("not a results file")
    code, out = cli(capsys, "ingest-results", "--root", str(repo), "--batch-results-dir", str(batch))
    assert code == 3, out  # partial: some accepted, some refused
    assert out["accepted"] == 1 and out["refused"] == 2 and len(out["files"]) == 3
    by_packet = {f["packet_id"]: f["receipt"] for f in out["files"]}
    assert "has no result" in by_packet[bad["packet_id"]]["errors"][0]["message"]
    assert "no run of this audit has" in by_packet["A9-R9-P99"]["errors"][0]["message"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, err = _failing(capsys, "ingest-results", "--root", str(repo), "--batch-results-dir", str(empty))
    assert code == 1 and "no results files" in err


def test_validate_results_gives_submit_packets_receipt_and_records_nothing(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _start(repo, capsys)
    good, bad = plan["packets"][0], plan["packets"][1]
    good_file = tmp_path / "good.json"
    good_file.write_text(json.dumps(reviewer.results(good)))
    broken = reviewer.results(bad)
    broken[0]["summary"] = "no obvious issues"
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps(broken))
    dry: dict[str, Any] = {}
    for packet, path in ((good, good_file), (bad, bad_file)):
        args = ("--root", str(repo), "--run-id", plan["run_id"], "--packet-id", packet["packet_id"])
        code, dry[packet["packet_id"]] = cli(capsys, "validate-results", *args, "--results", str(path))
        assert code == (0 if packet is good else 2)
        assert dry[packet["packet_id"]]["dry_run"] is True
    _, status = cli(capsys, "status", "--root", str(repo), "--json")
    assert next(r for r in status["runs"] if r["run_id"] == plan["run_id"])["submitted"] == 0  # nothing recorded
    for packet, path in ((good, good_file), (bad, bad_file)):
        args = ("--root", str(repo), "--run-id", plan["run_id"], "--packet-id", packet["packet_id"])
        _, real = cli(capsys, "submit-packet", *args, "--results", str(path))
        assert {k: real[k] for k in RECEIPT_FIELDS} == {k: dry[packet["packet_id"]][k] for k in RECEIPT_FIELDS}
    assert dry[bad["packet_id"]]["errors"] and not dry[bad["packet_id"]]["accepted"]


def test_explain_task_tells_a_tasks_whole_story(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    plan = _start(repo, capsys)
    first = plan["packets"][0]
    failures = tmp_path / "failures.json"
    failures.write_text(json.dumps([{"packet_id": first["packet_id"], "error": "the subagent ran out of turns"}]))
    for packet in plan["packets"][1:]:
        path = tmp_path / f"{packet['packet_id']}.json"
        path.write_text(json.dumps(reviewer.results(packet)))
        cli(capsys, "ingest-results", "--root", root, "--results", str(path))
    cli(capsys, "merge-and-ingest", "--root", root, "--run-id", plan["run_id"], "--failures", str(failures))
    task = first["tasks"][0]
    code, told = cli(capsys, "explain-task", "--root", root, task["task_id"])
    assert code == 0, told
    assert (told["file"], told["lens"], told["start_line"]) == (task["file"], task["lens"], task["start_line"])
    assert told["state"] == "pending" and told["attempts"] == 1 and told["max_attempts"] == 3
    assert [p["packet_id"] for p in told["packets"]] == [first["packet_id"]]
    assert told["packets"][0]["state"] == "failed" and told["packets"][0]["result"] is None
    assert told["failures"][0]["detail"] == "the subagent ran out of turns"
    assert "waiting for the next review run after 1 failed attempt(s) of 3" in told["why"]
    done = plan["packets"][1]["tasks"][0]
    _, closed = cli(capsys, "explain-task", "--root", root, done["task_id"].lower())
    assert closed["state"] in ("reviewed", "not_applicable")
    assert closed["packets"][0]["submitted_via"].startswith("file ") and closed["packets"][0]["result"]["summary"]
    assert f"by packet {plan['packets'][1]['packet_id']}" in closed["why"]
    code, err = _failing(capsys, "explain-task", "--root", root, "T99999")
    assert code == 1 and "is not in audit 1" in err


def test_requeue_sends_work_back_with_its_reason_in_the_next_prompt_and_a_new_report(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    _start(repo, capsys)
    _finish(repo, reviewer, capsys, tmp_path / "answers")
    _, report = cli(capsys, "report", "--root", root, "--format", "json")
    sqli = next(f for f in report["findings"] if f["file"] == "app/db.py")
    code, result = cli(
        capsys,
        "requeue",
        "--root",
        root,
        "--file",
        "app/auth.py",
        "--lens",
        "security",
        "--finding",
        sqli["id"],
        "--reason",
        "the token check was rewritten upstream; look at it again",
    )
    assert code == 0, result
    requeued = set(result["requeued"])
    assert len(requeued) >= 2 and not result["not_requeued"]
    _, step = cli(capsys, "next-step", "--root", root)
    assert step["step_kind"] == "dispatch_review"
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    tasks = {t["task_id"]: t for p in plan["packets"] for t in p["tasks"]}
    assert set(tasks) == requeued
    assert {(t["file"], t["lens"]) for t in tasks.values()} >= {("app/auth.py", "security"), ("app/db.py", "security")}
    prompt = " ".join(Path(plan["packets"][0]["prompt_path"]).read_text().split())
    assert "sent back to review on purpose" in prompt
    assert "the token check was rewritten upstream; look at it again" in prompt
    # Tasks out in the open run are left alone, and the exit code says not everything went back.
    code, held = cli(capsys, "requeue", "--root", root, "--task", next(iter(tasks)), "--reason", "again")
    assert code == 3 and "handed out in packet" in held["not_requeued"][next(iter(tasks))]
    _finish(repo, reviewer, capsys, tmp_path / "again")
    _, report = cli(capsys, "report", "--root", root, "--format", "json")
    # Runs: the context, the review, its verification, and the requeued review.
    assert report["completeness"] == "complete" and report["audit"]["runs"] == 4
    code, err = _failing(capsys, "requeue", "--root", root, "--file", "nowhere/*.py", "--reason", "x")
    assert code == 1 and "nothing to requeue" in err


def test_abandon_ends_the_audit_in_flight_keeps_its_ledger_and_the_next_step_starts_anew(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    plan = _start(repo, capsys)
    code, done = cli(capsys, "abandon", "--root", root, "--reason", "wrong lenses configured")
    assert code == 0 and done["runs_closed"] == [plan["run_id"]] and done["tasks_released"] > 0
    _, status = cli(capsys, "status", "--root", root, "--json")
    assert "wrong lenses configured" in status["abandoned"]
    assert any(e["action"] == "abandon" for e in status["ledger"])
    assert any(e["action"] == "dispatch" for e in status["ledger"])  # the audit's history is kept
    packet = plan["packets"][0]
    path = tmp_path / "late.json"
    path.write_text(json.dumps(reviewer.results(packet)))
    code, late = cli(
        capsys,
        "submit-packet",
        "--root",
        root,
        "--run-id",
        plan["run_id"],
        "--packet-id",
        packet["packet_id"],
        "--results",
        str(path),
    )
    assert code == 2 and "abandoned" in late["errors"][0]["message"]
    _, step = cli(capsys, "next-step", "--root", root)
    assert step["run_id"] == run_id(repo, 2, 1)
    code, _ = cli(capsys, "abandon", "--root", root)
    assert code == 0
    code, err = _failing(capsys, "abandon", "--root", root)
    assert code == 1 and "already abandoned" in err


def _age(path: Path, seconds: float) -> None:
    moment = time.time() - seconds
    os.utime(path, (moment, moment))


def test_cleanup_leaves_a_run_that_finished_minutes_ago_as_it_is(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _start(repo, capsys)
    _finish(repo, reviewer, capsys, tmp_path / "answers")
    code, dry = cli(capsys, "cleanup", "--root", str(repo), "--dry-run")
    first = run_id(repo)
    assert code == 0 and first in dry["too_recent"]
    assert not any(path.startswith(f"runs/{first}/") for path in dry["removed"])
    assert "finished less than 10 minutes ago" in dry["next_action"]


def test_cleanup_removes_finished_runs_files_and_orphans_and_never_the_state_or_report(
    repo: Path,
    reviewer: ScriptedReviewer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = str(repo)
    art = repo / ".audit-mcp"
    _start(repo, capsys)
    _finish(repo, reviewer, capsys, tmp_path / "answers")
    # As if ten minutes had passed since the runs finished (files get their age from utime below).
    monkeypatch.setattr(cleaning, "_finished_before", lambda _run, _now: True)
    _, before = cli(capsys, "report", "--root", root, "--format", "json")
    orphan_tmp, fresh_tmp = art / "steps" / ".current-step.json.x1.tmp", art / ".audit.y2.tmp"
    orphan_tmp.write_text("{")
    fresh_tmp.write_text("{")
    _age(orphan_tmp, 3600)
    orphan_run = art / "runs" / "A7-R3"
    (orphan_run / "packets").mkdir(parents=True)
    _age(orphan_run, 3600)
    code, dry = cli(capsys, "cleanup", "--root", root, "--dry-run")
    assert code == 0 and dry["dry_run"] is True
    first = run_id(repo)
    assert {f"runs/{first}/packets/", f"runs/{first}/dispatch-plan.json", "runs/A7-R3/"} <= set(dry["removed"])
    assert "steps/.current-step.json.x1.tmp" in dry["removed"] and ".audit.y2.tmp" not in dry["removed"]
    assert (art / f"runs/{first}/dispatch-plan.json").exists()
    code, done = cli(capsys, "cleanup", "--root", root)
    assert code == 0 and set(done["removed"]) == set(dry["removed"]) and done["bytes_freed"] > 0
    assert not (art / f"runs/{first}/packets").exists() and not orphan_run.exists() and not orphan_tmp.exists()
    assert fresh_tmp.exists() and (art / "audit.sqlite3").exists() and (art / "report/report.md").exists()
    _, after = cli(capsys, "report", "--root", root, "--format", "json")
    assert after["findings"] == before["findings"]
    _, status = cli(capsys, "status", "--root", root, "--json")
    assert status["completeness"] == "complete" and status["ledger"][0]["action"] == "cleanup"


def test_the_stage_verbs_run_one_obligation_when_it_is_due_and_say_what_they_did(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, plan = cli(capsys, "plan", "--root", root)
    assert code == 2 and plan["ran"] is False and "the next obligation is intake" in plan["detail"]
    code, intake = cli(capsys, "intake", "--root", root)
    assert code == 0 and intake["ran"] and intake["detail"].startswith("intake: ") and "in scope" in intake["detail"]
    assert intake["audit_id"] == 1 and intake["coverage"]["pending"] == 0
    code, again = cli(capsys, "intake", "--root", root)
    assert code == 2 and not again["ran"]
    code, plan = cli(capsys, "plan", "--root", root)
    assert code == 0 and plan["detail"].startswith("plan: ") and plan["coverage"]["pending"] > 0
    code, early = cli(capsys, "synthesize", "--root", root)
    assert code == 2 and "is not due" in early["detail"]
    _finish(repo, reviewer, capsys, tmp_path / "answers")
    (repo / ".audit-mcp/report/report.md").unlink()
    code, synth = cli(capsys, "synthesize", "--root", root)
    assert code == 0 and synth["ran"] and synth["completeness"] == "complete"
    assert Path(synth["artifact_paths"]["report"]).is_file()
    code, fresh = cli(capsys, "intake", "--root", root, "--new-audit")
    assert code == 0 and fresh["audit_id"] == 2
