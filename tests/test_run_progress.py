"""`audit-mcp run` says where it stands as it goes, ends with a final line, and an interrupted run ends with its
outcome and the exact command that resumes it."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from audit_mcp.surfaces.run_progress import RunProgress, StderrLines, duration
from tests.test_headless import headless, run_cmd

PROGRESS = re.compile(r"progress: (\d+) of (\d+) packets, (\S+(?: \S+)?) elapsed, (.+) left, (\d+) failed$")


def _progress(stderr: str) -> list[tuple[int, int, int]]:
    """(done, total, failed) of every progress line."""
    found = []
    for line in stderr.splitlines():
        match = PROGRESS.search(line)
        if match:
            found.append((int(match.group(1)), int(match.group(2)), int(match.group(5))))
    return found


def test_a_run_prints_how_many_packets_of_how_many_are_done_and_a_final_line(repo: Path, tmp_path: Path) -> None:
    proc = headless(repo, tmp_path / "state", "--max-workers", "2")
    assert proc.returncode == 0, proc.stderr
    seen = _progress(proc.stderr)
    result = json.loads(proc.stdout)
    done = result["progress"]["packets_done"]
    assert seen and seen[-1] == (done, done, 0), proc.stderr
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen), "the count only goes up"
    # Before any packet is done the time left is the forecast's; then the pace so far.
    assert "left (forecast)" in next(line for line in proc.stderr.splitlines() if "progress:" in line)
    assert re.search(r"progress: [1-9]\d* of \d+ packets, .* elapsed, about \S+(?: \S+)? left", proc.stderr)
    assert re.search(rf"audit-mcp: complete: {done} of {done} packets done in \S+", proc.stderr), proc.stderr
    assert result["progress"]["packets_forecast"] == done and result["resume_command"] is None


def test_failed_packets_are_counted_and_the_partial_outcome_says_how_to_go_on(repo: Path, tmp_path: Path) -> None:
    (repo / ".audit-mcp.toml").write_text("context_pass = false\n")
    proc = headless(repo, tmp_path / "state", "--max-wait", "0", SCRIPTED_WORKER_429="P01")
    assert proc.returncode == 3, proc.stderr
    assert any(failed == 1 for _, _, failed in _progress(proc.stderr)), proc.stderr
    result = json.loads(proc.stdout)
    assert result["progress"]["packets_failed"] == 1
    assert result["resume_command"] == shlex.join(["audit-mcp", *run_cmd(repo, "--max-wait", "0")[1:]])
    assert f"audit-mcp: to go on: {result['resume_command']}" in proc.stderr


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_prints_its_outcome_and_the_command_that_resumes_it(
    repo: Path, tmp_path: Path, how: signal.Signals
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    argv = run_cmd(repo, "--max-workers", "1")
    runner = subprocess.Popen(
        argv,
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
            if started == 3:  # the context packet, a review packet, and the one that hangs
                break
        runner.send_signal(how)
        out, rest = runner.communicate(timeout=60)
    finally:
        (state / "release").touch()
    assert runner.returncode == 130, rest
    result = json.loads(out)
    assert result["outcome"] == "interrupted" and result["exit_code"] == 130 and result["runs"]
    resume = shlex.join(["audit-mcp", *argv[1:]])
    assert result["resume_command"] == resume
    assert "accepted work is saved" in result["message"] and resume in result["message"]
    assert "interrupted; accepted work is saved" in rest and resume in rest
    assert result["progress"]["packets_done"] == 2
    # The worker that was stopped is in the ledger, and the resume command finishes the audit.
    ledger = subprocess.run(
        [argv[0], "ledger", "--root", str(repo)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    stopped = [json.loads(x) for x in ledger if '"action":"worker"' in x and "interrupted" in x]
    assert len(stopped) == 1 and stopped[0]["outcome"] == "stopped: the run was interrupted"
    again = subprocess.run(
        shlex.split(resume.replace("audit-mcp", argv[0], 1)),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SCRIPTED_WORKER_STATE": str(state)},
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["outcome"] == "complete"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_progress_line_is_redrawn_under_the_events_and_elsewhere_printed_as_a_line() -> None:
    screen = _Terminal()
    lines = StderrLines(screen)
    lines.progress("0 of 3 packets")
    lines.say("P01: worker started")
    lines.progress("1 of 3 packets")
    lines.close()
    assert screen.getvalue() == (
        "\r\x1b[Kaudit-mcp: progress: 0 of 3 packets"
        "\r\x1b[Kaudit-mcp: P01: worker started\naudit-mcp: progress: 0 of 3 packets"
        "\r\x1b[Kaudit-mcp: progress: 1 of 3 packets\n"
    )
    log = io.StringIO()
    lines = StderrLines(log)
    lines.progress("0 of 3 packets")
    lines.say("P01: worker \x1b[31mstarted")  # text from outside never carries an escape sequence
    lines.close()
    assert log.getvalue() == "audit-mcp: progress: 0 of 3 packets\naudit-mcp: P01: worker started\n"


def test_the_time_left_is_the_forecast_then_the_pace_so_far_and_the_total_follows_the_forecast() -> None:
    now = [100.0]
    tracker = RunProgress(clock=lambda: now[0])
    tracker.expect({"packets": 4, "time_range": "about 7 min to 28 min"})
    assert tracker.line() == "0 of 4 packets, 0s elapsed, about 7 min to 28 min left (forecast), 0 failed"
    tracker.launched()
    now[0] += 60
    tracker.finished(True)
    now[0] += 60
    tracker.finished(False)
    assert tracker.line() == "1 of 4 packets, 2m 00s elapsed, about 2m 00s left, 1 failed"
    # The next run's count: the failed packet went back to the queue, so three remain.
    tracker.expect({"packets": 3, "time_range": "about 3 min to 9 min"})
    assert tracker.total == 5
    assert tracker.final("complete") == "complete: 1 of 5 packets done in 2m 00s, 1 failed"
    assert (duration(45), duration(192), duration(3900)) == ("45s", "3m 12s", "1h 05m")
