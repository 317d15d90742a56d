"""`audit-mcp run --results FILE` and `--batch-results-dir DIR`: results produced elsewhere are recorded before the
run goes on and while it runs, instead of launching a worker for their packet."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.surfaces.demo import answer_key
from audit_mcp.surfaces.scripted import AnswerKeyReviewer
from tests.driving import cli
from tests.test_headless import WORKER, headless

CONFIG = "context_pass = false\nverification_pass = false\nmax_packet_tokens = 25000\n"


def _first_run(capsys: pytest.CaptureFixture[str], repo: Path) -> dict[str, Any]:
    (repo / ".audit-mcp.toml").write_text(CONFIG)
    _code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    plan: dict[str, Any] = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    assert len(plan["packets"]) >= 3
    return plan


def _answer(packet: dict[str, Any]) -> str:
    return json.dumps(AnswerKeyReviewer(answer_key(), decoys=False).results(packet))


def test_results_given_and_waiting_in_the_batch_folder_are_recorded_and_their_packets_never_launched(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _first_run(capsys, repo)
    first, second, third = (p["packet_id"] for p in plan["packets"][:3])
    given = tmp_path / f"{first}.json"
    given.write_text(_answer(plan["packets"][0]))
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / f"{second}.json").write_text('[{"task_id": "T0001", "status": "reviewed"}]')  # refused
    (batch / f"{third}.json").write_text(_answer(plan["packets"][2]))
    (batch / "A9-R9-000000-P01.json").write_text("[]")  # no such packet yet: left for later, not an error
    state = tmp_path / "state"
    proc = headless(repo, state, "--results", str(given), "--batch-results-dir", str(batch), "--max-workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert f"results file {given}: accepted for packet {first}" in proc.stderr
    assert f"results file {batch / third}.json: accepted for packet {third}" in proc.stderr
    assert f"results file {batch / second}.json: refused with" in proc.stderr
    assert "nothing of it was recorded (its packet goes to a worker)" in proc.stderr
    launched = {p.stem for p in state.glob("*.started")}
    assert first not in launched and third not in launched and second in launched
    assert json.loads(proc.stdout)["outcome"] == "complete"


def test_results_that_arrive_in_the_batch_folder_while_the_run_goes_are_taken_instead_of_a_worker(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _first_run(capsys, repo)
    order = plan["launch_order"]
    last = next(p for p in plan["packets"] if p["packet_id"] == order[-1])
    batch = tmp_path / "batch"
    batch.mkdir()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(_answer(last))
    # The first worker of the run hands the last packet's results to the folder, as another machine would.
    wrapper = tmp_path / "worker.py"
    wrapper.write_text(
        "import os, shutil, subprocess, sys\n"
        f"if os.environ['AUDIT_MCP_PACKET_ID'] == {order[0]!r}:\n"
        f"    shutil.copy({str(elsewhere)!r}, {str(batch / (order[-1] + '.json'))!r})\n"
        f"sys.exit(subprocess.call([sys.executable, {str(WORKER)!r}, *sys.argv[1:]]))\n"
    )
    template = (
        f"{sys.executable} {wrapper} --packet {{packet_id}} --run {{run_id}} --plan {{dispatch_plan}} "
        "--prompt {prompt_path} --root {root}"
    )
    state = tmp_path / "state"
    proc = headless(repo, state, "--worker", template, "--batch-results-dir", str(batch), "--max-workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert f"{order[-1]}: results file {batch / order[-1]}.json accepted (produced elsewhere; no worker started)" in (
        proc.stderr
    )
    assert order[-1] not in {p.stem for p in state.glob("*.started")}
    assert json.loads(proc.stdout)["progress"]["packets_done"] == len(order)


def test_a_batch_folder_that_is_not_one_is_refused_before_anything_runs(repo: Path, tmp_path: Path) -> None:
    proc = headless(repo, tmp_path / "state", "--batch-results-dir", str(tmp_path / "missing"))
    assert proc.returncode == 1 and "--batch-results-dir" in proc.stderr and "is not a folder" in proc.stderr
    assert not (repo / ".audit-mcp").exists()
