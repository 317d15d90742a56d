"""Large repositories: a run holds at most max_packets_per_run packets, and the benchmark script runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "scale.py"


def _plan(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def test_a_run_holds_at_most_max_packets_per_run_and_the_rest_follows_in_later_runs(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    (repo / ".audit-mcp.toml").write_text("max_packets_per_run = 1\n")
    service = AuditService(repo)
    step = service.next_step({"can_dispatch_subagents": True})
    seen: set[str] = set()
    runs = 0
    while step.step_kind == "dispatch_review":
        plan = _plan(step.artifact_paths["plan"])
        assert len(plan["packets"]) == 1 and step.packets_outstanding == 1
        tasks = {t["task_id"] for t in plan["packets"][0]["tasks"]}
        assert not tasks & seen
        seen |= tasks
        packet = plan["packets"][0]
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
        service.merge_and_ingest(plan["run_id"], [])
        runs += 1
        step = service.next_step()
    assert runs >= 2 and step.step_kind == "present_report"
    assert service.coverage()["completeness"] == "complete"


def test_the_scale_benchmark_runs_on_a_small_repository() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARK), "--files", "120"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    figures = json.loads(proc.stdout)
    assert figures["first_next_step"]["step_kind"] == "dispatch_review"
    assert figures["run_of_packets"]["final_step"] == "present_report"
    assert figures["largest_tool_result_tokens"] < 25_000
