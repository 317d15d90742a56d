"""SARIF output: valid against the official 2.1.0 schema and usable by GitHub code scanning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.findings.sarif import cwe_ids, render_sarif, rule_id
from audit_mcp.surfaces.cli import main
from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import drive
from tests.sarif_checks import github_problems, schema_errors
from tests.test_e2e_mcp import _read, drive_audit


def _cli_sarif(repo: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["report", "--root", str(repo), "--format", "sarif"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_complete_audit_as_sarif_passes_the_schema_and_the_github_checks(
    repo: Path, reviewer: ScriptedReviewer, answer_key: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    drive(AuditService(repo), reviewer.results)
    doc = _cli_sarif(repo, capsys)
    assert schema_errors(doc) == []
    assert github_problems(doc) == []
    assert json.loads((repo / ".audit-mcp" / "report" / "report.sarif").read_text()) == doc
    run = doc["runs"][0]
    assert run["invocations"][0]["executionSuccessful"] is True
    assert len(run["results"]) == len(answer_key["issues"])
    rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    sqli = rules["cwe-89"]
    assert {"security", "external/cwe/cwe-89"} <= set(sqli["properties"]["tags"])
    assert sqli["properties"]["security-severity"] == "9.5"
    assert sqli["shortDescription"]["text"] == "SQL injection"
    assert "security-severity" not in rules["n-plus-one-query"]["properties"]
    result = next(r for r in run["results"] if r["ruleId"] == "cwe-89")
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "app/db.py", "uriBaseId": "%SRCROOT%"}
    assert (location["region"]["startLine"], location["region"]["endLine"]) == (69, 72)
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    report = json.loads((repo / ".audit-mcp" / "report" / "report.json").read_text())
    fingerprints = {f["fingerprint"] for f in report["findings"]}
    assert {r["partialFingerprints"]["auditMcp/v1"] for r in run["results"]} == fingerprints


def test_an_incomplete_audit_says_so_and_names_every_gap_in_the_sarif(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".audit-mcp.toml").write_text("max_attempts = 1\n")
    service = AuditService(repo)
    step = service.next_step({"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    lost, *rest = plan["packets"]
    for packet in rest:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    service.merge_and_ingest(plan["run_id"], [{"packet_id": lost["packet_id"], "error": "the subagent timed out"}])
    assert service.next_step({}).step_kind == "present_report"
    doc = _cli_sarif(repo, capsys)
    assert schema_errors(doc) == [] and github_problems(doc) == []
    invocation = doc["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False
    report = json.loads(service.report("json"))
    gaps = report["gaps"]["cells"] + report["gaps"]["skipped_files"]
    assert len(gaps) == len(lost["tasks"]) + len(report["gaps"]["skipped_files"]) > len(lost["tasks"])
    notes = invocation["toolExecutionNotifications"]
    assert len(notes) == len(gaps)
    failed = {n["properties"]["taskId"] for n in notes if n["descriptor"]["id"] == "coverage/failed"}
    assert failed == {t["task_id"] for t in lost["tasks"]}
    assert all("timed out" in n["message"]["text"] for n in notes if n["descriptor"]["id"] == "coverage/failed")


def test_sarif_of_an_audit_without_findings_is_still_valid(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def clean(packet: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "task_id": t["task_id"],
                "status": "reviewed",
                "findings": [],
                "summary": f"Read {t['file']} in full and traced every input to its use.",
            }
            for t in packet["tasks"]
        ]

    drive(AuditService(repo), clean)
    doc = _cli_sarif(repo, capsys)
    assert schema_errors(doc) == [] and github_problems(doc) == []
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["tool"]["driver"]["rules"] == []


def test_the_github_checks_catch_what_code_scanning_rejects(repo: Path, reviewer: ScriptedReviewer) -> None:
    service = AuditService(repo)
    drive(service, reviewer.results)
    doc = render_sarif(service.build_report_input())
    rule = doc["runs"][0]["tool"]["driver"]["rules"][0]
    rule["help"]["text"] = " "
    rule["properties"]["security-severity"] = 9.5
    result = doc["runs"][0]["results"][0]
    result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "/abs/app/db.py"
    del result["partialFingerprints"]["auditMcp/v1"]
    problems = "\n".join(github_problems(doc))
    for expected in ("help.text", "security-severity must be a string", "not repo-relative", "project fingerprint"):
        assert expected in problems
    result["level"] = "fatal"
    assert any("fatal" in e for e in schema_errors(doc))


@pytest.mark.parametrize(
    ("category", "cwes", "rid"),
    [
        ("CWE-89", ["89"], "cwe-89"),
        ("sql injection (cwe_089)", ["89"], "sql-injection-cwe-089"),
        ("N+1 query", [], "n-1-query"),
        ("  ", [], "uncategorised"),
    ],
    ids=["plain", "embedded", "free-text", "blank"],
)
def test_categories_become_rule_ids_and_cwe_tags(category: str, cwes: list[str], rid: str) -> None:
    assert cwe_ids(category) == cwes
    assert rule_id(category) == rid


@pytest.mark.anyio
async def test_the_sarif_and_json_reports_are_mcp_resources(repo: Path, reviewer: ScriptedReviewer) -> None:
    async with Client(build_server(repo)) as client:
        await drive_audit(client, reviewer, repo)
        sarif = json.loads(await _read(client, "audit://report/sarif"))
        report = json.loads(await _read(client, "audit://report/json"))
    assert schema_errors(sarif) == [] and github_problems(sarif) == []
    assert len(sarif["runs"][0]["results"]) == len(report["findings"]) == len(reviewer.reported)
