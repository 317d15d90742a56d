"""`audit-mcp ledger`: the whole run ledger as JSON lines, each headless worker's life among them."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.surfaces.cli import main
from audit_mcp.usecases.ledger_log import LINE_FIELDS
from tests.driving import run_id
from tests.test_headless import headless

MODEL = "claude-sonnet-4-6"


def _ledger(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["ledger", *argv]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_every_worker_of_a_headless_run_is_in_the_exported_ledger(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    (repo / ".audit-mcp.toml").write_text("context_pass = false\nverification_pass = false\n")
    proc = headless(repo, tmp_path / "state", "--host-model", MODEL, "--max-wait", "0", SCRIPTED_WORKER_429="P02")
    assert proc.returncode == 3, proc.stderr
    lines = _ledger(capsys, "--root", str(repo))
    assert lines and all(list(line)[: len(LINE_FIELDS)] == list(LINE_FIELDS) for line in lines)
    assert [line["entry_id"] for line in lines] == sorted(line["entry_id"] for line in lines)
    workers = [line for line in lines if line["action"] == "worker"]
    plan = json.loads((repo / ".audit-mcp" / "runs" / run_id(repo) / "dispatch-plan.json").read_text())
    started = proc.stderr.count("worker started")
    assert len(workers) == started and {w["packet_id"] for w in workers} <= {p["packet_id"] for p in plan["packets"]}
    for worker in workers:
        assert worker["run_id"] == run_id(repo) and worker["provider"] == "anthropic"
        assert worker["worker"].startswith("python") and " pid " in worker["worker"]
        assert datetime.fromisoformat(worker["started_at"]) <= datetime.fromisoformat(worker["ended_at"])
    failed = [w for w in workers if w["packet_id"].endswith("-P02")]
    assert len(failed) == 1 and failed[0]["exit_status"] == 1 and failed[0]["failure_class"] == "rate_limited"
    assert failed[0]["outcome"] == "failed"
    done = [w for w in workers if w is not failed[0]]
    assert done and all(w["exit_status"] == 0 and w["failure_class"] is None for w in done)
    assert all(w["outcome"] == "submitted" for w in done)
    # Beside the workers: the dispatch, every accepted submission and the plan's forecast, with their fields.
    dispatch = next(line for line in lines if line["action"] == "dispatch")
    assert dispatch["run_id"] == run_id(repo) and dispatch["data"]["packets"] == len(plan["packets"])
    submitted = {line["packet_id"] for line in lines if line["action"] == "submit_packet"}
    assert submitted == {w["packet_id"] for w in done}
    assert any(line["action"] == "forecast" and line["data"]["packets"] for line in lines)
    assert _ledger(capsys, "--root", str(repo), "--audit", "1") == lines


def test_the_ledger_of_an_unknown_audit_or_a_folder_never_audited_is_refused_saying_what_to_pass(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "never-audited"
    folder.mkdir()
    assert main(["ledger", "--root", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "no audit has started" in err and "next_step" in err
    assert list(folder.iterdir()) == []
    assert main(["next-step", "--root", str(repo)]) == 0
    capsys.readouterr()
    assert main(["ledger", "--root", str(repo), "--audit", "7"]) == 1
    err = capsys.readouterr().err
    assert "no audit 7" in err and "its audits: 1" in err and "--audit" in err
