"""`audit-mcp run`: the server launches worker commands per packet, resumes after a kill, honours rate limits."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit_mcp.surfaces.headless import fill_template
from tests.driving import first_review, run_id

WORKER = Path(__file__).resolve().parent / "scripted_worker.py"
EXE = str(Path(sys.executable).with_name("audit-mcp"))
TEMPLATE = (
    f"{sys.executable} {WORKER} --packet {{packet_id}} --run {{run_id}} --plan {{dispatch_plan}} "
    "--prompt {prompt_path} --root {root}"
)


def run_cmd(root: Path, *extra: str) -> list[str]:
    return [EXE, "run", "--root", str(root), "--worker", TEMPLATE, *extra]


def headless(root: Path, state: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    state.mkdir(exist_ok=True)
    return subprocess.run(
        run_cmd(root, *extra),
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "SCRIPTED_WORKER_STATE": str(state), **env},
    )


def planted(answer_key: dict[str, Any]) -> set[tuple[str, int]]:
    return {(i["file"], i["start_line"]) for i in answer_key["issues"]}


def test_a_headless_run_completes_the_audit_with_worker_logs_per_packet(
    repo: Path, tmp_path: Path, answer_key: dict[str, Any]
) -> None:
    proc = headless(repo, tmp_path / "state", "--max-workers", "2")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outcome"] == "complete" and result["failed_packets"] == {}
    report = json.loads(Path(result["report_json"]).read_text())
    assert {(f["file"], f["start_line"]) for f in report["findings"]} == planted(answer_key)
    plan = json.loads((repo / ".audit-mcp" / "runs" / run_id(repo, 1, 1) / "dispatch-plan.json").read_text())
    logs = repo / ".audit-mcp" / "runs" / run_id(repo, 1, 1) / "workers"
    for packet in plan["packets"]:
        assert '"accepted": true' in (logs / f"{packet['packet_id']}.stdout").read_text()
    assert "up to 2 worker(s) at a time" in proc.stderr


def test_a_killed_run_resumes_with_only_the_missing_packets(
    repo: Path, tmp_path: Path, answer_key: dict[str, Any]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    runner = subprocess.Popen(
        run_cmd(repo, "--max-workers", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "SCRIPTED_WORKER_STATE": str(state), "SCRIPTED_WORKER_HANG_AFTER": "2"},
    )
    try:
        assert runner.stderr is not None
        started = 0
        # One worker at a time: the context packet, then the first review packet, then the second one hangs.
        for line in runner.stderr:
            started += "worker started" in line
            if started == 3:
                break
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    finally:
        (state / "release").touch()
        runner.communicate(timeout=30)
    done_before = {p.stem for p in state.glob("*.done")}
    assert done_before >= {f"{run_id(repo, 1, 1)}-P01"} and len(done_before) == 2
    proc = headless(repo, state)
    assert proc.returncode == 0, proc.stderr
    assert "resuming; 1 packet(s) already submitted" in proc.stderr
    # The review resumed, then its verification.
    assert json.loads(proc.stdout)["runs"] == [run_id(repo, 1, 2), run_id(repo, 1, 3)]
    first = (done_before - {f"{run_id(repo, 1, 1)}-P01"}).pop()
    assert f"{first}: worker started" not in proc.stderr
    report = json.loads((repo / ".audit-mcp" / "report" / "report.json").read_text())
    assert report["completeness"] == "complete"
    assert {(f["file"], f["start_line"]) for f in report["findings"]} == planted(answer_key)


def test_a_workers_429_becomes_a_cooldown_and_the_run_stops_to_resume_later(repo: Path, tmp_path: Path) -> None:
    # A review run of several packets, so that one failing leaves the run open (no context run of one first;
    # packets smaller than the default, so that the fixture makes more than two).
    (repo / ".audit-mcp.toml").write_text("context_pass = false\nmax_packet_tokens = 40000\n")
    proc = headless(repo, tmp_path / "state", "--max-wait", "0", SCRIPTED_WORKER_429="P01")
    assert proc.returncode == 3, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outcome"] == "partial" and "rate-limited" in result["message"] and "resume" in result["message"]
    first = run_id(repo)
    assert list(result["failed_packets"]) == [f"{first}-P01"] and "429" in result["failed_packets"][f"{first}-P01"]
    assert "Request rejected (429)" in (repo / f".audit-mcp/runs/{first}/workers/{first}-P01.stderr").read_text()
    # The failure was learned the moment the worker exited: the run stays open, waiting out the cooldown.
    quota = json.loads(
        subprocess.run([EXE, "quota", "--root", str(repo)], capture_output=True, text=True, check=True).stdout
    )
    assert quota["schedule"]["cooldown_until"] is not None and quota["learned"]["last_429_at"] is not None
    status = json.loads(
        subprocess.run(
            [EXE, "plan-status", "--root", str(repo), "--run-id", first], capture_output=True, text=True, check=True
        ).stdout
    )
    assert status["cooldown_until"] == quota["schedule"]["cooldown_until"] and status["failed"] == 1
    assert f"{first}-P01" not in [w["packet_id"] for w in status["waiting"]]


def test_a_rate_limited_worker_narrows_the_rest_of_its_own_run(repo: Path, tmp_path: Path) -> None:
    from audit_mcp.surfaces.headless import HeadlessRunner
    from audit_mcp.usecases.service import AuditService

    (repo / ".audit-mcp.toml").write_text(
        "max_packet_tokens = 30000\ncontext_pass = false\nverification_pass = false\n"
        "[model]\nrequests_per_minute = 4000\ninput_tokens_per_minute = 2000000\n"
        "output_tokens_per_minute = 400000\n"
    )
    lines: list[str] = []
    waits: list[float] = []
    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "SCRIPTED_WORKER_STATE": str(state), "SCRIPTED_WORKER_429": "-P"}
    runner = HeadlessRunner(AuditService(repo), TEMPLATE, max_workers=4, say=lines.append, sleep=waits.append, env=env)
    runner.run()
    log = "\n".join(lines)
    window = re.search(r"up to (\d+) worker\(s\) at a time", log)
    assert window is not None and int(window.group(1)) == 4, log
    narrower = [int(n) for n in re.findall(r"the scheduler now keeps (\d+) worker\(s\) running", log)]
    # Halved at the first 429; the others of the same wave were launched before it, so they change nothing more.
    first = re.search(rf"run {run_id(repo, 1, 1)}: (\d+) packet\(s\)", log)
    assert first is not None, log
    # The next run hands the same packets out again, narrowed.
    again = f"run {run_id(repo, 1, 2)}: {first.group(1)} packet(s), up to 2 worker(s) at a time"
    assert narrower[:1] == [2] and again in log, log
    assert waits and all(100 < w <= 120 for w in waits)  # the workers' "retry-after: 120", waited mid-run


def test_sigterm_stops_the_run_and_its_workers_and_keeps_accepted_work(repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    runner = subprocess.Popen(
        run_cmd(repo, "--max-workers", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SCRIPTED_WORKER_STATE": str(state), "SCRIPTED_WORKER_HANG_AFTER": "2"},
    )
    try:
        assert runner.stderr is not None
        started = 0
        for line in runner.stderr:
            started += "worker started" in line
            if started == 2:
                break
        runner.terminate()
        _, rest = runner.communicate(timeout=30)
    finally:
        (state / "release").touch()
    assert runner.returncode == 130
    assert "interrupted; accepted work is saved" in rest
    assert len(list(state.glob("*.done"))) == 1


def test_workers_that_time_out_are_killed_and_a_repeated_failure_blocks(repo: Path, tmp_path: Path) -> None:
    proc = headless(repo, tmp_path / "state", "--timeout", "0.3", SCRIPTED_WORKER_HANG_AFTER="0")
    assert proc.returncode == 4, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outcome"] == "blocked" and "failed the same way" in result["message"]
    assert all("timed out" in text for text in result["failed_packets"].values())


def test_the_worker_template_quotes_every_value() -> None:
    command = fill_template(
        "w --p {packet_id} --r {root} {unknown}",
        {"prompt_path": "/x", "run_id": "R", "packet_id": "P1", "root": "/my repo; rm -rf ~", "dispatch_plan": "/d"},
    )
    assert command == "w --p P1 --r '/my repo; rm -rf ~' {unknown}"


def test_run_refuses_an_empty_worker_template(repo: Path) -> None:
    proc = subprocess.run(
        [EXE, "run", "--root", str(repo), "--worker", " "], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1 and "command template" in proc.stderr


def test_run_and_its_worker_environment_are_documented() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "headless.md").read_text()
    for name in (
        "AUDIT_MCP_PROMPT_PATH",
        "AUDIT_MCP_RUN_ID",
        "AUDIT_MCP_PACKET_ID",
        "AUDIT_MCP_ROOT",
        "AUDIT_MCP_DISPATCH_PLAN",
        "audit-mcp run",
        "exit code 3",
        "exit code 4",
    ):
        assert name in page


def test_the_next_run_waits_out_a_cooldown_within_max_wait(repo: Path, tmp_path: Path) -> None:
    from audit_mcp.surfaces.headless import HeadlessRunner
    from audit_mcp.usecases.service import AuditService

    waits: list[float] = []

    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "SCRIPTED_WORKER_STATE": str(state), "SCRIPTED_WORKER_429": f"{run_id(repo)}-P01"}
    runner = HeadlessRunner(AuditService(repo), TEMPLATE, max_wait=600, sleep=waits.append, env=env)
    result = runner.run()
    # The context packet hit the rate limit, waited, went again; then the review and its verification.
    assert result.outcome == "complete" and result.runs == [run_id(repo, 1, n) for n in (1, 2, 3, 4)]
    # The worker's "retry-after: 120", waited out before the next launch (the test's sleep does not pass time,
    # so the next run waits for it again, for what is left of it: real time passes between the runs, seconds
    # each on a loaded machine).
    assert waits and 100 < waits[0] <= 120 and all(0 < w <= waits[0] for w in waits)
    assert list(result.failures) == [f"{run_id(repo, 1, 1)}-P01"]


def test_workers_start_no_sooner_than_their_launch_offsets(repo: Path, tmp_path: Path) -> None:
    import time

    from audit_mcp.core.models import PlanStatus
    from audit_mcp.surfaces.headless import HeadlessRunner
    from audit_mcp.usecases.service import AuditService

    class Paced(AuditService):
        """The server's answer between waves, with its launch offsets shortened to test speed."""

        def plan_status(self, run_id: str, failures: Any = None, launched: Any = None) -> PlanStatus:
            status = super().plan_status(run_id, failures, launched)
            order = {p: n for n, p in enumerate(plan_ids)}
            for packet in status.waiting:
                packet.not_before_seconds = min(order[packet.packet_id], 2) * 0.6
            return status

    # A few review packets, and no other run whose packets the offsets above would not know.
    (repo / ".audit-mcp.toml").write_text(
        'lenses = ["security"]\nmax_packet_tokens = 12000\ncontext_pass = false\nverification_pass = false\n'
    )
    service = Paced(repo)
    step = first_review(
        service, {"can_dispatch_subagents": True, "max_active_subagents": 8, "dispatch_mode": "rolling"}
    )
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    plan_ids = [p["packet_id"] for p in plan["packets"]]
    assert len(plan_ids) >= 3
    started: dict[str, float] = {}

    def record(line: str) -> None:
        if line.endswith(")") and ": worker started" in line:
            started[line.split(":")[0].strip()] = time.monotonic()

    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "SCRIPTED_WORKER_STATE": str(state)}
    result = HeadlessRunner(service, TEMPLATE, max_workers=8, say=record, env=env).run()
    assert result.outcome == "complete"
    first, second, third = (started[p] for p in plan_ids[:3])
    assert second - first >= 0.6 and third - first >= 1.2
    assert all(started[p] - first >= 1.2 for p in plan_ids[2:])
