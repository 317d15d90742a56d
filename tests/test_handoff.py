"""The operator hand-off: files beside a blocked step saying what happened, what to do, how to resume."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from tests.driving import call_ok, cli
from tests.test_headless import headless

NEXT = ("--host-can-dispatch-subagents", "true")


def _handoff(repo: Path) -> tuple[Path, Path]:
    steps = repo / ".audit-mcp" / "steps"
    return steps / "operator-handoff.json", steps / "operator-handoff.md"


def _resume(capsys: pytest.CaptureFixture[str], command: str) -> tuple[int, Any]:
    argv = shlex.split(command)
    assert argv[0] == "audit-mcp"
    return cli(capsys, *argv[1:])


def test_a_config_error_writes_the_handoff_and_fixing_it_removes_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".audit-mcp.toml").write_text("max_runs = 'many'\n")
    code, step = cli(capsys, "next-step", "--root", str(repo), *NEXT)
    assert step["step_kind"] == "blocked"
    json_path, md_path = _handoff(repo)
    assert step["artifact_paths"]["operator_handoff"] == str(json_path)
    doc = json.loads(json_path.read_text())
    assert doc["status"] == "blocked" and "max_runs" in doc["what_happened"]
    assert doc["blocker_recorded"] is False and "--retry-blocked" not in doc["resume_command"]
    assert doc["resume_command"].startswith("audit-mcp next-step --root ")
    markdown = md_path.read_text()
    assert "a person must act" in markdown and doc["resume_command"] in markdown and "max_runs" in markdown
    assert "operator-handoff.md" in Path(step["prompt_path"]).read_text()
    (repo / ".audit-mcp.toml").unlink()
    code, step = _resume(capsys, doc["resume_command"])
    assert code == 0 and step["step_kind"] == "dispatch_review"
    assert not json_path.exists() and not md_path.exists()


def test_a_recorded_blocker_resumes_with_retry_blocked(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    _, step = cli(capsys, "next-step", "--root", root, *NEXT)
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    failures = tmp_path / "failures.json"
    failures.write_text(json.dumps([{"packet_id": plan["packets"][0]["packet_id"], "error": "HTTP 401 Unauthorized"}]))
    cli(capsys, "merge-and-ingest", "--root", root, "--run-id", plan["run_id"], "--failures", str(failures))
    _, step = cli(capsys, "next-step", "--root", root)
    assert step["step_kind"] == "blocked"
    doc = json.loads(_handoff(repo)[0].read_text())
    assert doc["blocker_recorded"] is True and "authentication" in doc["what_happened"]
    assert doc["resume_command"].endswith("--retry-blocked")
    assert doc["resume_tool_call"] == {"tool": "next_step", "arguments": {"retry_blocked": True}}
    code, step = _resume(capsys, doc["resume_command"])
    assert code == 0 and step["step_kind"] == "dispatch_review"
    assert not _handoff(repo)[0].exists()


def test_a_blocked_headless_run_hands_off_the_same_run_command_to_resume(repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = headless(repo, state, "--max-workers", "2", SCRIPTED_WORKER_AUTH="1")
    assert proc.returncode == 4, proc.stderr
    doc = json.loads(_handoff(repo)[0].read_text())
    argv = shlex.split(doc["resume_command"])
    assert argv[:2] == ["audit-mcp", "run"] and argv[-1] == "--retry-blocked"
    assert "--max-workers" in argv and "--worker" in argv
    proc = headless(repo, state, *argv[argv.index("--max-workers") :])
    assert proc.returncode == 0, proc.stderr
    assert not _handoff(repo)[0].exists()


@pytest.mark.anyio
async def test_over_mcp_a_blocked_step_names_its_handoff(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text("lenses = ['no-such-lens']\n")
    async with Client(build_server(repo)) as client:
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True})
    assert step["step_kind"] == "blocked"
    doc = json.loads(Path(step["artifact_paths"]["operator_handoff"]).read_text())
    assert doc["resume_tool_call"] == {"tool": "next_step", "arguments": {}}
    assert "no-such-lens" in doc["what_happened"]
