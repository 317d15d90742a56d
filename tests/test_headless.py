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
from tests.driving import run_id

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
        env={**os.environ, "SCRIPTED_WORKER_STATE": str(state), "SCRIPTED_WORKER_HANG_AFTER": "1"},
    )
    try:
        assert runner.stderr is not None
        started = 0
        for line in runner.stderr:  # the second worker starts only once the first has submitted (window of 1)
            started += "worker started" in line
            if started == 2:
                break
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
    finally:
        (state / "release").touch()
        runner.communicate(timeout=30)
    done_before = {p.stem for p in state.glob("*.done")}
    assert len(done_before) == 1
    proc = headless(repo, state)
    assert proc.returncode == 0, proc.stderr
    assert "resuming; 1 packet(s) already submitted" in proc.stderr
    assert json.loads(proc.stdout)["runs"] == [run_id(repo, 1, 1)]
    first = done_before.pop()
    assert f"{first}: worker started" not in proc.stderr
    report = json.loads((repo / ".audit-mcp" / "report" / "report.json").read_text())
    assert report["completeness"] == "complete"
    assert {(f["file"], f["start_line"]) for f in report["findings"]} == planted(answer_key)


def test_a_workers_429_becomes_a_cooldown_and_the_run_stops_to_resume_later(repo: Path, tmp_path: Path) -> None:
    proc = headless(repo, tmp_path / "state", "--max-wait", "0", SCRIPTED_WORKER_429="P01")
    assert proc.returncode == 3, proc.stderr
    result = json.loads(proc.stdout)
    assert result["outcome"] == "partial" and "rate-limited" in result["message"]
    first = run_id(repo)
    assert list(result["failed_packets"]) == [f"{first}-P01"] and "429" in result["failed_packets"][f"{first}-P01"]
    assert "Request rejected (429)" in (repo / f".audit-mcp/runs/{first}/workers/{first}-P01.stderr").read_text()
    next_plan = json.loads((repo / f".audit-mcp/runs/{run_id(repo, 1, 2)}/dispatch-plan.json").read_text())
    assert next_plan["cooldown_until"] is not None
    quota = json.loads(
        subprocess.run([EXE, "quota", "--root", str(repo)], capture_output=True, text=True, check=True).stdout
    )
    assert quota["schedule"]["cooldown_until"] == next_plan["cooldown_until"]
    assert quota["learned"]["last_429_at"] is not None


def test_rate_limited_workers_shrink_the_window_for_the_rest_of_the_run(repo: Path, tmp_path: Path) -> None:
    (repo / ".audit-mcp.toml").write_text("max_packet_tokens = 30000\n")  # several packets, waves of 3 or more
    proc = headless(repo, tmp_path / "state", "--max-wait", "0", SCRIPTED_WORKER_429="-P")
    assert proc.returncode == 3, proc.stderr
    window = re.search(r"up to (\d+) worker\(s\) at a time", proc.stderr)
    assert window is not None and int(window.group(1)) >= 3, proc.stderr
    assert f"rate-limited: at most {int(window.group(1)) // 2} worker(s) at a time" in proc.stderr
    assert "rate-limited: at most 1 worker(s) at a time for the rest of this run" in proc.stderr
    failed = json.loads(proc.stdout)["failed_packets"]
    assert len(failed) > 3 and all("429" in text for text in failed.values())


def test_sigterm_stops_the_run_and_its_workers_and_keeps_accepted_work(repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    runner = subprocess.Popen(
        run_cmd(repo, "--max-workers", "1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SCRIPTED_WORKER_STATE": str(state), "SCRIPTED_WORKER_HANG_AFTER": "1"},
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
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
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
        assert name in readme


def test_the_next_run_waits_out_a_cooldown_within_max_wait(repo: Path, tmp_path: Path) -> None:
    from audit_mcp.surfaces.headless import HeadlessRunner
    from audit_mcp.usecases.service import AuditService

    waits: list[float] = []

    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "SCRIPTED_WORKER_STATE": str(state), "SCRIPTED_WORKER_429": f"{run_id(repo)}-P01"}
    runner = HeadlessRunner(AuditService(repo), TEMPLATE, max_wait=600, sleep=waits.append, env=env)
    result = runner.run()
    assert result.outcome == "complete" and result.runs == [run_id(repo, 1, 1), run_id(repo, 1, 2)]
    assert len(waits) == 1 and 100 < waits[0] <= 120  # the worker's "retry-after: 120"
    assert list(result.failures) == [f"{run_id(repo, 1, 1)}-P01"]


def test_workers_start_no_sooner_than_their_launch_offsets(repo: Path, tmp_path: Path) -> None:
    import time

    from audit_mcp.surfaces.headless import HeadlessRunner
    from audit_mcp.usecases.service import AuditService

    (repo / ".audit-mcp.toml").write_text('lenses = ["security"]\nmax_packet_tokens = 12000\n')  # a few packets
    service = AuditService(repo)
    step = service.next_step({"can_dispatch_subagents": True, "max_active_subagents": 8})
    plan_path = Path(step.artifact_paths["plan"])
    plan = json.loads(plan_path.read_text())
    assert len(plan["packets"]) >= 3
    # A plan paced by the scheduler, shortened to test speed: the 2nd packet at +0.6 s, the rest at +1.2 s.
    for n, packet in enumerate(plan["packets"]):
        packet["not_before_seconds"] = min(n, 2) * 0.6
    plan_path.write_text(json.dumps(plan))
    started: dict[str, float] = {}

    def record(line: str) -> None:
        if line.endswith(")") and ": worker started" in line:
            started[line.split(":")[0].strip()] = time.monotonic()

    state = tmp_path / "state"
    state.mkdir()
    env = {**os.environ, "SCRIPTED_WORKER_STATE": str(state)}
    result = HeadlessRunner(service, TEMPLATE, max_workers=8, say=record, env=env).run()
    assert result.outcome == "complete"
    first, second, third = (started[p["packet_id"]] for p in plan["packets"][:3])
    assert second - first >= 0.6 and third - first >= 1.2
    assert all(started[p["packet_id"]] - first >= 1.2 for p in plan["packets"][2:])
