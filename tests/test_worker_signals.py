"""What a successful headless worker printed about its usage and the provider's rate limits is read, learned
and reported, as a failed worker's error text is."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.driving import run_id
from tests.test_headless import EXE, headless

MODEL = "claude-sonnet-4-6"


def _cli(repo: Path, *argv: str) -> dict[str, Any]:
    done = subprocess.run([EXE, *argv, "--root", str(repo)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_usage_and_headers_printed_by_successful_workers_are_learned_and_reported(repo: Path, tmp_path: Path) -> None:
    proc = headless(
        repo, tmp_path / "state", "--host-model", MODEL, SCRIPTED_WORKER_PRINTS="claude", SCRIPTED_WORKER_HEADERS="P01"
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        f"{run_id(repo)}-P01: submitted; it printed usage (21620 input, 4106 output tokens, 14 call(s), 62s)"
        in proc.stderr
    )
    assert "rate-limit headers (input_tokens_per_minute=450000, requests_per_minute=1000)" in proc.stderr
    quota = _cli(repo, "quota", "--host-model", MODEL)
    itpm = quota["limits"]["input_tokens_per_minute"]
    assert (itpm["value"], itpm["confidence"]) == (450_000, "high") and "rate-limit headers" in itpm["source"]
    status = _cli(repo, "status", "--json")
    merges = [e for e in status["ledger"] if e["action"] == "merge_and_ingest"]
    assert any("successful workers printed" in str(e["detail"]) for e in merges), merges


def test_a_rejected_usage_window_printed_by_a_successful_worker_stops_the_run_for_a_person(
    repo: Path, tmp_path: Path
) -> None:
    resets = datetime.now(UTC) + timedelta(hours=3)
    proc = headless(
        repo,
        tmp_path / "state",
        "--host-model",
        MODEL,
        SCRIPTED_WORKER_REJECTED="P01",
        SCRIPTED_WORKER_RESETS=str(int(resets.timestamp())),
    )
    result = json.loads(proc.stdout)
    # The work the worker did is kept; the window it reported is a hard stop, as a failed worker's would be.
    assert proc.returncode == 4, proc.stderr
    assert result["outcome"] == "blocked" and f"{run_id(repo)}-P01" not in result["failed_packets"]
    assert "usage window is exhausted until" in result["message"], result["message"]
    assert f"printed by the worker of packet {run_id(repo)}-P01, whose work is kept" in result["message"]
    handoff = json.loads((repo / ".audit-mcp" / "steps" / "operator-handoff.json").read_text())
    assert handoff["blocker_recorded"] is True and "--retry-blocked" in handoff["resume_command"]
    assert "run --root" in handoff["resume_command"] and "usage window" in handoff["what_happened"]
