"""SARIF output: valid against the official 2.1.0 schema and usable by GitHub code scanning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.findings.line_hash import primary_location_line_hash
from audit_mcp.findings.sarif import MAX_DESCRIPTION_CHARS, render_sarif, rule_id
from audit_mcp.surfaces.cli import main
from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import drive, finish, first_review
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
    assert sqli["shortDescription"]["text"] == "SQL injection (CWE-89)"
    assert sqli["helpUri"] == "https://cwe.mitre.org/data/definitions/89.html"
    assert "security-severity" not in rules["n-plus-one"]["properties"]
    result = next(r for r in run["results"] if r["ruleId"] == "cwe-89")
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "app/db.py", "uriBaseId": "%SRCROOT%"}
    assert (location["region"]["startLine"], location["region"]["endLine"]) == (69, 72)
    sqli_issue = next(i for i in answer_key["issues"] if i["category"] == "CWE-89")
    source = (repo / "app" / "db.py").read_bytes()
    assert result["partialFingerprints"]["primaryLocationLineHash"] == primary_location_line_hash(source, 69)
    first_line = source.decode().splitlines()[68]
    quoted = sqli_issue["evidence"].splitlines()[0].strip()
    assert location["region"]["startColumn"] == first_line.index(quoted) + 1
    assert run["columnKind"] == "utf16CodeUnits"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"
    report = json.loads((repo / ".audit-mcp" / "report" / "report.json").read_text())
    fingerprints = {f["fingerprint"] for f in report["findings"]}
    assert {r["partialFingerprints"]["auditMcp/v1"] for r in run["results"]} == fingerprints


def test_an_incomplete_audit_says_so_and_names_every_gap_in_the_sarif(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".audit-mcp.toml").write_text("max_attempts = 1\n")
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    lost, *rest = plan["packets"]
    for packet in rest:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    service.merge_and_ingest(plan["run_id"], [{"packet_id": lost["packet_id"], "error": "the subagent timed out"}])
    assert finish(service).step_kind == "present_report"
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
    ("category_id", "rid"),
    [("CWE-89", "cwe-89"), ("n-plus-one", "n-plus-one"), ("other-error-handling", "other-error-handling")],
    ids=["cwe", "class", "lens-catch-all"],
)
def test_rule_ids_come_from_the_taxonomy_id(category_id: str, rid: str) -> None:
    assert rule_id(category_id) == rid


# Every planted category, reworded the way another reviewer (or the same one, a week later) would put it.
REWORDED = {
    "CWE-89": "SQL injection: username concatenated into the query",
    "CWE-798": "hardcoded secret (token signing key in source)",
    "CWE-22": "directory traversal in the download handler",
    "CWE-79": "Stored XSS via innerHTML",
    "CWE-193": "off-by-one in the page offset",
    "CWE-390": "swallowed exception when flushing",
    "CWE-362": "data race: unsynchronised read-modify-write",
    "n-plus-one-query": "N+1 queries per note",
    "duplicated-logic": "copy-pasted validation rules",
}


def _sources(repo: Path, doc: dict[str, Any]) -> dict[str, bytes]:
    uris = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for result in doc["runs"][0]["results"]
        for loc in result["locations"] + result.get("relatedLocations", [])
    }
    return {uri: (repo / uri).read_bytes() for uri in uris}


def _identities(doc: dict[str, Any]) -> dict[tuple[str, int], tuple[str, str, str]]:
    return {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        ): (r["ruleId"], r["partialFingerprints"]["auditMcp/v1"], r["partialFingerprints"]["primaryLocationLineHash"])
        for r in doc["runs"][0]["results"]
    }


def test_a_re_audit_that_rewords_every_category_keeps_every_alert_s_identity(
    repo: Path, answer_key: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".audit-mcp.toml").write_text("carry_forward = false\n")  # the second audit reviews everything again
    issues = answer_key["issues"]
    assert set(REWORDED) == {i["category"] for i in issues}
    service = AuditService(repo)
    drive(service, ScriptedReviewer({"issues": issues}).results)
    first = _cli_sarif(repo, capsys)
    reworded = [issue | {"category": REWORDED[issue["category"]]} for issue in issues]
    drive(service, ScriptedReviewer({"issues": reworded}).results, new_audit=True)
    second = _cli_sarif(repo, capsys)

    for doc in (first, second):
        assert schema_errors(doc) == []
        assert github_problems(doc, _sources(repo, doc)) == []
    assert _identities(second) == _identities(first)
    assert len(_identities(first)) == len(issues)
    assert {r["baselineState"] for r in second["runs"][0]["results"]} == {"unchanged"}
    said = {r["properties"]["category"] for r in second["runs"][0]["results"]}
    assert said == set(REWORDED.values())  # the reviewer's words are kept beside the stable id
    assert [rule["id"] for rule in second["runs"][0]["tool"]["driver"]["rules"]] == [
        rule["id"] for rule in first["runs"][0]["tool"]["driver"]["rules"]
    ]


def test_related_locations_are_linked_from_the_message_and_reviewer_brackets_cannot_forge_links(
    repo: Path, answer_key: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    issues = [dict(i) for i in answer_key["issues"]]
    sqli = next(i for i in issues if i["category"] == "CWE-89")
    sqli["description"] = "The [username](1) reaches execute() as text; see rows[0] for the result."
    sqli["related_locations"] = [
        {"file": "app/handlers.py", "start_line": 1, "end_line": 1, "role": "source"},
        {"file": sqli["file"], "start_line": sqli["start_line"], "end_line": sqli["start_line"], "role": "sink [db]"},
    ]
    drive(AuditService(repo), ScriptedReviewer({"issues": issues}).results)
    doc = _cli_sarif(repo, capsys)
    assert github_problems(doc, _sources(repo, doc)) == []
    result = next(r for r in doc["runs"][0]["results"] if r["ruleId"] == "cwe-89")
    text = result["message"]["text"]
    assert text.endswith("Related: [source](1), [sink (db)](2).")
    assert "\\[username\\](1)" in text and "rows[0]" in text  # a link-like phrase is escaped, other brackets kept
    assert [(loc["id"], loc["message"]["text"]) for loc in result["relatedLocations"]] == [
        (1, "source"),
        (2, "sink (db)"),
    ]


def test_the_github_checks_catch_broken_links_columns_and_long_descriptions(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    drive(service, reviewer.results)
    doc = render_sarif(service.build_report_input())
    run = doc["runs"][0]
    rule = run["tool"]["driver"]["rules"][0]
    rule["fullDescription"]["text"] = "x" * (MAX_DESCRIPTION_CHARS + 1)
    rule["name"] = "N" * 256
    result = run["results"][0]
    result["relatedLocations"] = [
        {"id": 1, "message": {"text": "x"}, "physicalLocation": result["locations"][0]["physicalLocation"]}
    ]
    result["message"]["text"] = "See [there](2)."
    region = result["locations"][0]["physicalLocation"]["region"]
    region.update(startLine=3, endLine=3, startColumn=5, endColumn=5)
    result["partialFingerprints"]["primaryLocationLineHash"] = "deadbeef:1"
    problems = "\n".join(github_problems(doc, _sources(repo, doc)))
    for expected in (
        "over GitHub's 1,024",
        "name is over 255",
        "related location 1 is not linked",
        "names no related location",
        "endColumn is one past",
        "is not what the upload action computes",
    ):
        assert expected in problems, expected


@pytest.mark.anyio
async def test_the_sarif_and_json_reports_are_mcp_resources(repo: Path, reviewer: ScriptedReviewer) -> None:
    async with Client(build_server(repo)) as client:
        await drive_audit(client, reviewer, repo)
        sarif = json.loads(await _read(client, "audit://report/sarif"))
        report = json.loads(await _read(client, "audit://report/json"))
    assert schema_errors(sarif) == [] and github_problems(sarif) == []
    assert len(sarif["runs"][0]["results"]) == len(report["findings"]) == len(reviewer.reported)
