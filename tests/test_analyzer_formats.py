"""Analyzer leads from any SARIF producer and from the plain JSON of bandit and semgrep, auto-detected, given
on the command line, in the config, or as the ``analyzer_results`` argument of the ``next_step`` tool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.cli.exits import EXIT_BLOCKED
from audit_mcp.surfaces.server import build_server
from tests.conftest import FIXTURES
from tests.driving import carried, cli, first_review_over_mcp, past_context_json

BANDIT_SARIF = FIXTURES / "planted_app.bandit.sarif"
NEXT = ("--host-can-dispatch-subagents", "true")


def _bandit_json(repo: Path, out: Path) -> Path:
    """What `bandit -r . -f json` really writes for the fixture."""
    exe = str(Path(sys.executable).with_name("bandit"))
    done = subprocess.run(
        [exe, "-r", ".", "-f", "json", "-q", "-o", str(out)], cwd=repo, capture_output=True, timeout=120
    )
    assert done.returncode in (0, 1) and out.is_file(), done.stderr
    return out


def _semgrep_json(out: Path) -> Path:
    """`semgrep --json` output, as its schema (semgrep_output_v1) has it."""
    doc = {
        "version": "1.95.0",
        "errors": [],
        "paths": {"scanned": ["app/db.py", "app/handlers.py"]},
        "results": [
            {
                "check_id": "python.lang.security.audit.formatted-sql-query.formatted-sql-query",
                "path": "app/db.py",
                "start": {"line": 70, "col": 9, "offset": 2301},
                "end": {"line": 71, "col": 20, "offset": 2400},
                "extra": {
                    "message": "Detected possible formatted SQL query. Use parameterized queries instead.",
                    "severity": "WARNING",
                    "metadata": {
                        "cwe": ["CWE-89: Improper Neutralization of Special Elements used in an SQL Command"],
                        "references": ["https://stackoverflow.com/questions/775296"],
                        "source": "https://semgrep.dev/r/python.lang.security.audit.formatted-sql-query",
                    },
                    "lines": "requires login",
                },
            },
            {
                "check_id": "generic.secrets.gitleaks.generic-api-key",
                "path": "../outside/secrets.py",
                "start": {"line": 3, "col": 1, "offset": 10},
                "end": {"line": 3, "col": 40, "offset": 50},
                "extra": {"message": "A secret", "severity": "ERROR", "metadata": {}},
            },
        ],
    }
    out.write_text(json.dumps(doc))
    return out


def _plan(step: dict[str, Any]) -> dict[str, Any]:
    return json.loads(Path(step["artifact_paths"]["plan"]).read_text())


def _leads(step: dict[str, Any]) -> dict[str, tuple[str, int, str]]:
    found: dict[str, tuple[str, int, str]] = {}
    for packet in _plan(step)["packets"]:
        found.update(carried(Path(packet["prompt_path"]).read_text()))
    return found


def test_bandit_and_semgrep_json_are_detected_and_their_alerts_become_leads(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bandit = _bandit_json(repo, tmp_path / "bandit.json")
    semgrep = _semgrep_json(tmp_path / "semgrep.json")
    code, step = cli(
        capsys,
        "next-step",
        "--root",
        str(repo),
        *NEXT,
        "--analyzer-results",
        str(bandit),
        "--analyzer-results",
        str(semgrep),
    )
    assert code == 0, step
    step = past_context_json(repo, step)
    assert step["step_kind"] == "dispatch_review", step
    leads = _leads(step)
    places = {(file, line, rule) for file, line, rule in leads.values()}
    assert ("app/db.py", 70, "Bandit B608 (CWE-89)") in places
    assert ("app/config.py", 18, "Bandit B105 (CWE-259)") in places
    assert any(f == "app/db.py" and n == 70 and r.startswith("Semgrep python.lang.security") for f, n, r in places)
    assert not any("secrets.py" in f for f, _, _ in places)  # outside the repository: dropped
    db = next(p for p in _plan(step)["packets"] if any(t["file"] == "app/db.py" for t in p["tasks"]))
    assert "Use parameterized queries" in Path(db["prompt_path"]).read_text()


def test_the_same_bandit_alerts_as_sarif_and_as_json_are_one_lead_each(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bandit = _bandit_json(repo, tmp_path / "bandit.json")
    code, step = cli(
        capsys,
        "next-step",
        "--root",
        str(repo),
        *NEXT,
        "--analyzer-sarif",
        str(BANDIT_SARIF),
        "--analyzer-results",
        str(bandit),
    )
    assert code == 0, step
    step = past_context_json(repo, step)
    assert sorted((f, n) for f, n, _ in _leads(step).values()) == [
        ("app/config.py", 18),
        ("app/db.py", 70),
        ("app/jobs.py", 17),
    ]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"results": [{"task_id": "T1", "status": "reviewed"}]}', "neither bandit's"),
        ("[1, 2, 3]", "a JSON array"),
        ('{"issues": []}', "a JSON object with issues"),
        ("not json at all", "not valid JSON"),
    ],
)
def test_anything_else_is_refused_saying_what_it_is_and_what_is_read(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, said: str
) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(content)
    code, step = cli(capsys, "next-step", "--root", str(repo), *NEXT, "--analyzer-results", str(odd))
    assert code == EXIT_BLOCKED and step["step_kind"] == "blocked", step
    assert said in step["reason"] and str(odd) in step["reason"]
    if said != "not valid JSON":
        assert "bandit -r . -f json" in step["reason"] and "semgrep --json" in step["reason"]


def test_the_config_names_bandit_json_inside_the_repository(repo: Path, tmp_path: Path) -> None:
    _bandit_json(repo, repo / "bandit-report.json")
    (repo / ".audit-mcp.toml").write_text('[analyzers]\nresults = ["bandit-report.json"]\n')
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    done = subprocess.run([exe, "next-step", "--root", str(repo), *NEXT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    step = past_context_json(repo, json.loads(done.stdout))
    assert ("app/db.py", 70, "Bandit B608 (CWE-89)") in set(_leads(step).values())


@pytest.mark.anyio
async def test_the_next_step_tool_takes_analyzer_results_inside_the_root_only(repo: Path, tmp_path: Path) -> None:
    (repo / "reports").mkdir()
    _bandit_json(repo, repo / "reports" / "bandit.json")
    outside = _semgrep_json(tmp_path / "semgrep.json")
    (repo / "reports" / "escape.json").symlink_to(outside)
    async with Client(build_server(root=repo)) as client:
        for bad, why in (
            (str(outside), "outside the repository"),
            ("../semgrep.json", "escapes the repository root"),
            ("reports/escape.json", "outside the repository root"),
        ):
            refused = await client.call_tool(
                "next_step", {"host_can_dispatch_subagents": True, "analyzer_results": [bad]}
            )
            assert refused.is_error, bad
            text = refused.content[0].text  # type: ignore[union-attr]
            assert why in text and "inside the repository" in text, text
        status = await client.call_tool("audit_status", {})
        assert not status.is_error and status.structured_content is not None
        assert status.structured_content.get("audit_id") is None, status.structured_content  # nothing started
        step = await first_review_over_mcp(
            client, {"host_can_dispatch_subagents": True, "analyzer_results": ["reports/bandit.json"]}
        )
        assert step is not None and step["step_kind"] == "dispatch_review", step
        assert ("app/db.py", 70, "Bandit B608 (CWE-89)") in set(_leads(step).values())
