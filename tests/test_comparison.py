"""A later audit of the same repository says what is new, what persists and what was fixed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.findings.comparison import compare
from audit_mcp.findings.synthesis import synthesize
from audit_mcp.store.records import Resolution
from audit_mcp.surfaces.cli import main
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer, git
from tests.driving import drive, report_json
from tests.sarif_checks import github_problems, schema_errors

FIXED_QUERY = """    row = conn.execute(
        "SELECT id, username, password_hash FROM users WHERE username = ?", (username,)
    ).fetchone()"""


def _fix_sqli_and_plant_a_new_issue(repo: Path, issues: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fix the planted SQL injection; return the issues a reviewer finds afterwards (one of them new)."""
    sqli = next(i for i in issues if i["id"] == "sqli-user-lookup")
    db = repo / "app" / "db.py"
    text = db.read_text()
    assert sqli["evidence"] in text
    db.write_text(text.replace(sqli["evidence"], FIXED_QUERY))
    git(repo, "commit", "-qam", "parameterise the user lookup")
    lines = db.read_text().splitlines()
    line = next(n for n, t in enumerate(lines, 1) if "def get_connection" in t)
    new = {
        "id": "new-connection-per-call",
        "lens": "performance",
        "file": "app/db.py",
        "start_line": line,
        "end_line": line,
        "evidence": lines[line - 1],
        "title": "A new connection for every query",
        "severity": "low",
        "confidence": "medium",
        "category": "connection-churn",
        "description": "Every helper opens its own connection, so a request pays the connection cost many times.",
        "recommendation": "Open one connection per request and pass it to the helpers.",
        "symbol": "get_connection",
    }
    return [i for i in issues if i is not sqli] + [new]


def test_a_second_audit_marks_the_fixed_finding_resolved_and_the_rest_persisting_or_new(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    service = AuditService(repo)
    drive(service, reviewer.results)
    first = report_json(service)
    assert first["comparison"] is None and all(f["baseline_state"] is None for f in first["findings"])
    sqli_fp = next(f["fingerprint"] for f in first["findings"] if f["category"] == "CWE-89")

    later = _fix_sqli_and_plant_a_new_issue(repo, reviewer.issues)
    drive(service, ScriptedReviewer({"issues": later}).results, new_audit=True)
    second = report_json(service)

    comparison = second["comparison"]
    assert comparison["baseline_audit_id"] == first["audit"]["audit_id"] != second["audit"]["audit_id"]
    assert [f["fingerprint"] for f in comparison["resolved"]] == [sqli_fp]
    assert comparison["counts"] == {
        "new": 1,
        "persisting": len(first["findings"]) - 1,
        "resolved": 1,
        "not_rechecked": 0,
    }
    states = {f["category"]: f["baseline_state"] for f in second["findings"]}
    assert states.pop("connection-churn") == "new"
    assert set(states.values()) == {"persisting"}

    markdown = service.report("md")
    assert "## Changes since the previous audit" in markdown
    assert f"SQL injection in user lookup by username (`app/db.py:69`, fingerprint `{sqli_fp}`)" in markdown
    assert "1 new, 8 persisting, 1 resolved" in markdown

    assert main(["report", "--root", str(repo), "--format", "sarif"]) == 0
    sarif = json.loads(capsys.readouterr().out)
    assert schema_errors(sarif) == [] and github_problems(sarif) == []
    baseline = {r["ruleId"]: r["baselineState"] for r in sarif["runs"][0]["results"]}
    # "connection-churn" names no listed class: it is filed under the lens's catch-all
    assert baseline.pop("other-performance") == "new" and set(baseline.values()) == {"unchanged"}
    assert "cwe-89" not in baseline
    assert sarif["runs"][0]["properties"]["baseline"]["resolved"][0]["fingerprint"] == sqli_fp


def _raw(file: str, lens: str, evidence: str) -> dict[str, Any]:
    return {
        "title": "t",
        "severity": "low",
        "confidence": "low",
        "category": "c",
        "file": file,
        "start_line": 1,
        "end_line": 1,
        "evidence": evidence,
        "description": "d",
        "recommendation": "r",
        "lens": lens,
        "packet_id": "P",
        "run_id": "R",
    }


def test_a_finding_is_resolved_only_for_a_reason_and_never_because_nobody_reported_it_again() -> None:
    previous = synthesize(
        [
            _raw("a.py", "security", "x = 1 + 1"),
            _raw("b.py", "security", "y = 2 + 2"),
            _raw("c.py", "security", "z = 3"),
        ]
    )
    current = synthesize([])
    gone = next(f for f in previous.findings if f.file == "a.py")
    record = Resolution(gone.fingerprint, "lines_gone", {"packet_id": "A2-R1-000000-P01"})
    c = compare(current, previous, 1, {gone.fingerprint: record}, present={"a.py", "b.py"})
    assert sorted(f.file for f in c.resolved) == ["a.py", "c.py"]
    assert [f.file for f in c.not_rechecked] == ["b.py"]  # silence resolves nothing
    assert c.why[gone.fingerprint].startswith("its lines are gone")
    assert "its file c.py is gone" in c.why.values()
