"""Reports say no more than the audit proves: scripted reviews say so, a report mid-audit is provisional,
and an audit that reviewed nothing is not complete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit_mcp.surfaces.cli import main
from tests.driving import cli


def test_the_demo_report_says_in_every_format_that_its_reviews_were_scripted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    report = tmp_path / "planted_app" / ".audit-mcp" / "report"
    markdown = (report / "report.md").read_text()
    assert "**Reviews: scripted.**" in markdown.split("## Work blocks")[0]
    doc = json.loads((report / "report.json").read_text())
    assert doc["reviews"]["scripted"] is True and "no model judged this code" in doc["reviews"]["by"][0]
    sarif = json.loads((report / "report.sarif").read_text())
    run = sarif["runs"][0]
    assert run["properties"]["reviews"]["scripted"] is True
    notes = [n["message"]["text"] for n in run["invocations"][0]["toolExecutionNotifications"]]
    assert any("scripted" in note for note in notes)


def test_a_report_before_any_review_is_provisional_and_claims_nothing(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, step = cli(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    assert code == 0 and step["step_kind"] == "dispatch_review"
    code, markdown = cli(capsys, "report", "--root", root)
    assert code == 0
    head = markdown.split("## Work blocks")[0]
    assert "**Provisional:**" in head and "0 of " in head
    assert "nothing to fix" not in markdown and "every file in scope was reviewed" not in markdown
    assert "No findings so far" in markdown
    code, doc = cli(capsys, "report", "--root", root, "--format", "json")
    assert code == 0 and doc["provisional"] is True and doc["completeness"] == "unknown"
    assert doc["reviews"] == {"scripted": False, "by": []}
    code, sarif = cli(capsys, "report", "--root", root, "--format", "sarif")
    assert code == 0 and sarif["runs"][0]["properties"]["provisional"] is True
    assert sarif["runs"][0]["invocations"][0]["executionSuccessful"] is False


def test_an_audit_with_nothing_in_scope_is_not_complete(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / ".audit-mcp.toml").write_text('include = ["nomatch/**"]\n')
    root = str(repo)
    code, step = cli(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    assert code == 0 and step["step_kind"] == "present_report" and step["completeness"] == "partial", step
    code, markdown = cli(capsys, "report", "--root", root)
    assert code == 0 and "Completeness: complete" not in markdown and "**Completeness: partial**" in markdown
    assert "Nothing was reviewed" in markdown and "include" in markdown
    code, doc = cli(capsys, "report", "--root", root, "--format", "json")
    assert code == 0 and doc["completeness"] == "partial" and "include" in doc["completeness_reason"]
    code, sarif = cli(capsys, "report", "--root", root, "--format", "sarif")
    assert code == 0 and sarif["runs"][0]["invocations"][0]["executionSuccessful"] is False
