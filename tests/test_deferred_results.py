"""Deferred results: a results file at a packet's documented path counts as its submission, even unsubmitted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import cli, finish, past_context_json, run_id
from tests.test_headless import headless, planted, run_cmd

NEXT = ("--host-can-dispatch-subagents", "true", "--host-max-active-subagents", "4")


def _plan(step: dict[str, Any]) -> dict[str, Any]:
    return json.loads(Path(step["artifact_paths"]["plan"]).read_text())


def _results_path(repo: Path, run_id: str, packet_id: str) -> Path:
    """The name the packet's prompt gives its results file (it carries a token sealed with the user's key)."""
    return AuditService(repo).results_path(run_id, packet_id)


def _ledger(repo: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    _, status = cli(capsys, "status", "--root", str(repo), "--json")
    return list(status["ledger"])


def test_a_results_file_written_but_never_submitted_is_merged_as_the_packets_submission(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    _, step = cli(capsys, "next-step", "--root", root, *NEXT)
    plan = _plan(past_context_json(repo, step))
    first, *others = plan["packets"]
    path = _results_path(repo, plan["run_id"], first["packet_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reviewer.results(first)))  # the reviewer wrote its answer and stopped
    for packet in others:
        receipts = tuple(
            cli(capsys, "submit-packet", "--root", root, "--run-id", plan["run_id"], "--packet-id", p, "--results", f)
            for p, f in [(packet["packet_id"], _write(repo, packet, reviewer))]
        )
        assert receipts[0][0] == 0
    code, summary = cli(capsys, "merge-and-ingest", "--root", root, "--run-id", plan["run_id"])
    assert code == 0, summary
    assert summary["ingested_from_files"] == [first["packet_id"]]
    assert summary["packets_merged"] == len(plan["packets"]) and summary["packets_failed"] == 0
    assert summary["tasks_requeued"] == 0
    entry = next(e for e in _ledger(repo, capsys) if first["packet_id"] in e["detail"] and "from file" in e["detail"])
    assert f"ingested from file runs/{plan['run_id']}/results/{path.name}" in entry["detail"]
    assert entry["outcome"] == "accepted"
    finish(AuditService(repo))  # the verification run
    _, step = cli(capsys, "next-step", "--root", root)
    assert step["step_kind"] == "present_report" and step["completeness"] == "complete"


def _write(repo: Path, packet: dict[str, Any], reviewer: ScriptedReviewer) -> str:
    path = repo.parent / f"{packet['packet_id']}.json"
    path.write_text(json.dumps(reviewer.results(packet)))
    return str(path)


def test_next_step_counts_a_valid_results_file_so_the_host_is_not_sent_to_redo_it(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    _, step = cli(capsys, "next-step", "--root", root, *NEXT)
    plan = _plan(past_context_json(repo, step))
    first = plan["packets"][0]
    path = _results_path(repo, plan["run_id"], first["packet_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reviewer.results(first)))
    _, again = cli(capsys, "next-step", "--root", root)
    if len(plan["packets"]) == 1:
        assert again["step_kind"] == "present_report"
    else:
        assert again["packets_outstanding"] == len(plan["packets"]) - 1
        prompt = Path(again["prompt_path"]).read_text()
        assert f"already submitted ({first['packet_id']})" in prompt  # done: not to be launched again
    path.write_text("[]")  # a later, different file changes nothing: the packet is submitted
    code, summary = cli(capsys, "merge-and-ingest", "--root", root, "--run-id", plan["run_id"])
    assert code == 0 and first["packet_id"] not in summary["invalid_results_files"]


def test_an_invalid_results_file_is_reported_with_its_errors_and_the_packet_reissued_with_them(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    _, step = cli(capsys, "next-step", "--root", root, *NEXT)
    plan = _plan(past_context_json(repo, step))
    first = plan["packets"][0]
    broken = reviewer.results(first)
    broken[0]["summary"] = ""  # refused: every task needs a summary of what was examined
    path = _results_path(repo, plan["run_id"], first["packet_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(broken))
    for packet in plan["packets"][1:]:
        cli(
            capsys,
            "submit-packet",
            "--root",
            root,
            "--run-id",
            plan["run_id"],
            "--packet-id",
            packet["packet_id"],
            "--results",
            _write(repo, packet, reviewer),
        )
    _, summary = cli(capsys, "merge-and-ingest", "--root", root, "--run-id", plan["run_id"])
    error = summary["invalid_results_files"][first["packet_id"]]
    assert "/results/0/summary" in error and "was refused" in error
    assert summary["failure_kinds"] == {"invalid_results": 1}
    assert {t["task_id"] for t in summary["requeued"]} == {t["task_id"] for t in first["tasks"]}
    assert any(e["outcome"] == "refused" and e["action"] == "ingest_results_file" for e in _ledger(repo, capsys))
    _, step = cli(capsys, "next-step", "--root", root)
    again = _plan(step)
    prompt = Path(again["packets"][0]["prompt_path"]).read_text()
    assert "/results/0/summary" in prompt and "was refused" in prompt
    assert {t["task_id"] for p in again["packets"] for t in p["tasks"]} == {t["task_id"] for t in first["tasks"]}


def test_the_packet_prompt_says_the_results_file_alone_is_enough(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, step = cli(capsys, "next-step", "--root", str(repo), *NEXT)
    packet = _plan(step)["packets"][0]
    prompt = " ".join(Path(packet["prompt_path"]).read_text().split())
    assert "With file access only" in prompt and "The file alone is enough" in prompt
    assert str(_results_path(repo, _plan(step)["run_id"], packet["packet_id"])) in prompt


def test_a_worker_killed_right_after_writing_its_file_keeps_its_work(
    repo: Path, tmp_path: Path, answer_key: dict[str, Any]
) -> None:
    proc = headless(repo, tmp_path / "state", SCRIPTED_WORKER_DIE_AFTER_WRITE="P01")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # Context, review and verification: the first worker of each run dies right after writing its answer.
    assert result["runs"] == [run_id(repo, 1, n) for n in (1, 2, 3)] and result["failed_packets"] == {}
    assert f"{run_id(repo, 1, 1)}-P01: results file accepted" in proc.stderr
    assert f"{run_id(repo, 1, 2)}-P01: results file accepted" in proc.stderr
    report = json.loads((repo / ".audit-mcp/report/report.json").read_text())
    assert report["completeness"] == "complete"
    assert {(f["file"], f["start_line"]) for f in report["findings"]} == planted(answer_key)


def test_a_run_killed_after_a_worker_wrote_its_file_resumes_without_reissuing_that_packet(
    repo: Path, tmp_path: Path, answer_key: dict[str, Any]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    written = state / "written.fifo"
    os.mkfifo(written)
    runner = subprocess.Popen(
        run_cmd(repo, "--max-workers", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={
            **os.environ,
            "SCRIPTED_WORKER_STATE": str(state),
            "SCRIPTED_WORKER_HANG_AFTER_WRITE": f"{run_id(repo, 1, 2)}-P01",
        },
    )
    try:
        assert written.read_text() == f"{run_id(repo, 1, 2)}-P01"  # blocks until the worker has written its file
        written.unlink()
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    finally:
        (state / "release").touch()
        runner.communicate(timeout=30)
    assert not (state / f"{run_id(repo, 1, 2)}-P01.done").exists()  # it never submitted
    proc = headless(repo, state)
    assert proc.returncode == 0, proc.stderr
    assert f"{run_id(repo, 1, 2)}-P01: worker started" not in proc.stderr
    assert "resuming; 1 packet(s) already submitted" in proc.stderr
    # The review resumed, then its verification.
    assert json.loads(proc.stdout)["runs"] == [run_id(repo, 1, 2), run_id(repo, 1, 3)]
    report = json.loads((repo / ".audit-mcp/report/report.json").read_text())
    assert report["completeness"] == "complete"
    assert {(f["file"], f["start_line"]) for f in report["findings"]} == planted(answer_key)


def test_in_file_mode_workers_only_write_their_results_file(repo: Path, tmp_path: Path) -> None:
    proc = headless(repo, tmp_path / "state", "--worker-mode", "file", SCRIPTED_WORKER_FILE_ONLY="1")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "complete"
    assert "results file accepted" in proc.stderr and ": submitted" not in proc.stderr
    assert not list((tmp_path / "state").glob("*.done"))


def test_a_worker_whose_file_is_refused_is_reported_and_its_packet_handed_out_again(repo: Path, tmp_path: Path) -> None:
    proc = headless(
        repo, tmp_path / "state", "--worker-mode", "file", SCRIPTED_WORKER_BREAK=f"{run_id(repo, 1, 2)}-P01"
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    # The context, the review, the re-issue, the verification.
    assert result["runs"] == [run_id(repo, 1, n) for n in (1, 2, 3, 4)]
    first = f"{run_id(repo, 1, 2)}-P01"
    assert "was refused" in result["failed_packets"][first]
    assert "evidence" in result["failed_packets"][first]
    prompt = next((repo / f".audit-mcp/runs/{run_id(repo, 1, 3)}/packets").glob("*.md")).read_text()
    earlier = " ".join(prompt[prompt.index("## Earlier attempts") : prompt.index("## Submit")].split())
    shown = f"runs/{run_id(repo, 1, 2)}/results/{_results_path(repo, run_id(repo, 1, 2), first).name}"
    assert f"invalid_results: the results file {shown} was refused" in earlier
    assert "/results/0/findings/0/evidence: the evidence does not appear in" in earlier


def test_run_stops_after_max_runs_and_the_same_command_goes_on(repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = headless(
        repo, state, "--max-runs", "2", "--worker-mode", "file", SCRIPTED_WORKER_BREAK=f"{run_id(repo, 1, 2)}-P01"
    )
    assert proc.returncode == 3, proc.stderr
    result = json.loads(proc.stdout)
    assert result["runs"] == [run_id(repo, 1, 1), run_id(repo, 1, 2)] and "--max-runs 2" in result["message"]
    proc = headless(repo, state, "--worker-mode", "file")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"] == [run_id(repo, 1, 3), run_id(repo, 1, 4)]


def test_run_since_a_ref_reviews_only_the_files_changed_since_it(repo: Path, tmp_path: Path) -> None:
    db = repo / "app" / "db.py"
    db.write_text(db.read_text() + "\n# touched\n")
    proc = headless(repo, tmp_path / "state", "--since", "HEAD")
    # Partial: with no earlier audit to carry, the files unchanged since HEAD were reviewed by nobody.
    assert proc.returncode == 3, proc.stderr
    context = json.loads((repo / f".audit-mcp/runs/{run_id(repo, 1, 1)}/dispatch-plan.json").read_text())
    assert context["packet_kind"] == "context"  # the threat model reads the whole repository first
    plan = json.loads((repo / f".audit-mcp/runs/{run_id(repo, 1, 2)}/dispatch-plan.json").read_text())
    assert {t["file"] for p in plan["packets"] for t in p["tasks"]} == {"app/db.py"}
