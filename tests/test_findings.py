"""Findings you can trust: evidence checked against the file, one finding per problem, stable identities."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.engine.checks import MAX_EVIDENCE_LINES, locate_evidence
from audit_mcp.findings.synthesis import fingerprint, synthesize
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer, git
from tests.driving import drive, first_review, report_json, with_second_lens


@pytest.fixture
def dispatched(repo: Path) -> tuple[AuditService, dict[str, Any]]:
    service = AuditService(repo)
    step = first_review(service)
    return service, json.loads(Path(step.artifact_paths["plan"]).read_text())


def _sqli_submission(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer
) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    _, plan = dispatched
    packet = next(p for p in plan["packets"] if any(t["file"] == "app/db.py" for t in p["tasks"]))
    results = copy.deepcopy(reviewer.results(packet))
    finding = next(f for r in results for f in r["findings"] if f["category"] == "CWE-89")
    return packet, results, finding


def test_evidence_quoted_from_other_lines_is_moved_there_with_a_warning_naming_them(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer
) -> None:
    service, plan = dispatched
    packet, results, finding = _sqli_submission(dispatched, reviewer)
    finding["start_line"], finding["end_line"] = 20, 23
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert receipt.accepted, receipt.errors
    moved = [w for w in receipt.warnings if "evidence is at lines 69-72" in w.message]
    assert moved and "not 20-23" in moved[0].message and moved[0].location.endswith("/start_line")
    service.merge_and_ingest(plan["run_id"], [])
    stored = [f for f in report_json(service)["findings"] if f["category"] == "CWE-89"]
    assert [(f["start_line"], f["end_line"]) for f in stored] == [(69, 72)]


def test_evidence_that_is_nowhere_in_the_file_is_refused(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer
) -> None:
    service, plan = dispatched
    packet, results, finding = _sqli_submission(dispatched, reviewer)
    finding["evidence"] = 'row = conn.execute("SELECT * FROM users WHERE name = " + username)'
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert not receipt.accepted
    assert any(e.location.endswith("/evidence") and "does not appear in app/db.py" in e.message for e in receipt.errors)


def test_reindented_multi_line_evidence_is_accepted_where_it_is(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer
) -> None:
    service, plan = dispatched
    packet, results, finding = _sqli_submission(dispatched, reviewer)
    finding["evidence"] = "\n".join("  " + line.strip() + "   " for line in finding["evidence"].splitlines())
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert receipt.accepted, receipt.errors
    assert not [w for w in receipt.warnings if "evidence" in w.message]


def test_evidence_over_the_length_limit_is_refused_with_the_limit(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer, repo: Path
) -> None:
    service, plan = dispatched
    packet, results, finding = _sqli_submission(dispatched, reviewer)
    lines = (repo / "app" / "db.py").read_text().splitlines()
    finding["evidence"] = "\n".join(lines[: MAX_EVIDENCE_LINES + 5])
    finding["start_line"], finding["end_line"] = 1, MAX_EVIDENCE_LINES + 5
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert not receipt.accepted
    assert any(f"at most {MAX_EVIDENCE_LINES} lines" in e.message for e in receipt.errors)


_LINES = ["a = 1", "  b = 2", "", "   c = 3", "a = 1  # again"]


@pytest.mark.parametrize(
    ("evidence", "expected"),
    [
        ("a = 1", [(1, 1), (5, 5)]),
        ("b = 2\n\n   c = 3", [(2, 4)]),
        ("b = 2\nc = 3", [(2, 4)]),
        ("b   =   2", [(2, 2)]),
        ("c = 3\nb = 2", []),
        ("   \n", []),
    ],
    ids=["every-occurrence", "multi-line", "blank-lines-ignored", "whitespace-insensitive", "order-matters", "blank"],
)
def test_locate_evidence_finds_every_whitespace_insensitive_occurrence(
    evidence: str, expected: list[tuple[int, int]]
) -> None:
    assert locate_evidence(_LINES, evidence) == expected


def _raw(**overrides: Any) -> dict[str, Any]:
    base = {
        "title": "SQL injection in user lookup",
        "severity": "high",
        "confidence": "high",
        "category": "CWE-89",
        "file": "app/db.py",
        "start_line": 69,
        "end_line": 72,
        "evidence": "row = conn.execute(\n    \"SELECT ... '%s'\"\n    % username",
        "description": "d",
        "recommendation": "r",
        "lens": "security",
        "packet_id": "A1-R1-P01",
        "run_id": "A1-R1",
    }
    return base | overrides


def test_the_same_problem_from_two_lenses_is_one_finding_with_both_lenses_and_the_highest_severity() -> None:
    s = synthesize(
        [
            _raw(),
            _raw(
                lens="correctness",
                category="sql-injection",
                severity="critical",
                packet_id="A1-R1-P02",
                title="Unescaped username in query",
            ),
        ]
    )
    assert len(s.findings) == 1
    f = s.findings[0]
    assert sorted(f.lenses) == ["correctness", "security"]
    assert f.severity == "critical"
    assert sorted(f.reporters) == ["A1-R1-P01", "A1-R1-P02"]
    assert any(r.startswith("critical from the correctness lens") for r in f.severity_reasons)
    assert any(r.startswith("high from the security lens") for r in f.severity_reasons)
    assert sorted(f.categories) == ["CWE-89", "sql-injection"] and f.category_id == "CWE-89"
    assert len(f.aliases) == 1  # both wordings are filed as CWE-89, so they share one fingerprint


def test_overlapping_findings_of_one_category_from_other_packets_and_runs_merge_keeping_every_range() -> None:
    s = synthesize(
        [
            _raw(),
            _raw(
                start_line=70,
                end_line=71,
                evidence="\"SELECT ... '%s'\"\n    % username",
                packet_id="A1-R2-P01",
                run_id="A1-R2",
                severity="medium",
            ),
        ]
    )
    assert len(s.findings) == 1
    f = s.findings[0]
    assert f.severity == "high" and f.locations == [(69, 72), (70, 71)]
    assert f.reporters == ["A1-R1-P01", "A1-R2-P01"]


def test_different_problems_at_the_same_lines_stay_apart() -> None:
    s = synthesize(
        [
            _raw(),
            _raw(
                lens="performance",
                category="n-plus-one-query",
                evidence="conn = get_connection()",
                start_line=68,
                end_line=68,
                title="Connection per call",
            ),
            _raw(category="CWE-209", title="Query errors leak the SQL text"),
        ]
    )
    assert sorted(f.category for f in s.findings) == ["CWE-209", "CWE-89", "n-plus-one-query"]


def test_a_fingerprint_ignores_line_numbers_and_reindentation_but_not_the_code() -> None:
    evidence = "row = conn.execute(\n    query % username\n)"
    fp = fingerprint("app/db.py", "CWE-89", evidence)
    assert fingerprint("app/db.py", "cwe-89 ", "  row = conn.execute(\n\tquery % username\n  )") == fp
    assert fingerprint("app/db.py", "CWE-89", evidence.replace("username", "name")) != fp
    assert fingerprint("app/other.py", "CWE-89", evidence) != fp
    moved = synthesize([_raw(evidence=evidence, start_line=169, end_line=171)]).findings[0].fingerprint
    assert moved == synthesize([_raw(evidence=evidence)]).findings[0].fingerprint == fp


def test_an_audit_reports_a_problem_two_lenses_found_once_with_both(repo: Path, reviewer: ScriptedReviewer) -> None:
    service = AuditService(repo)
    drive(service, with_second_lens(reviewer))
    doc = report_json(service)
    sqli = [f for f in doc["findings"] if f["file"] == "app/db.py" and f["start_line"] == 69]
    assert len(sqli) == 1
    assert sorted(sqli[0]["lenses"]) == ["correctness", "security"]
    assert sqli[0]["severity"] == "critical"
    assert len(sqli[0]["severity_reasons"]) == 2
    markdown = service.report("md")
    assert "Reported 2 times; the severity is the highest of" in markdown


def test_a_fingerprint_survives_lines_inserted_above_the_finding(repo: Path, reviewer: ScriptedReviewer) -> None:
    service = AuditService(repo)
    drive(service, reviewer.results)
    before = {f["category"]: f["fingerprint"] for f in report_json(service)["findings"]}
    db = repo / "app" / "db.py"
    db.write_text('"""Storage."""\n\n# Connection helpers and queries.\n\n' + db.read_text())
    git(repo, "commit", "-qam", "doc comment")
    drive(service, ScriptedReviewer({"issues": reviewer.issues}).results, new_audit=True)
    after = report_json(service)["findings"]
    sqli = next(f for f in after if f["category"] == "CWE-89")
    assert sqli["start_line"] == 73
    assert {f["category"]: f["fingerprint"] for f in after} == before


def test_work_blocks_are_units_of_change_in_severity_order_with_an_effort_hint() -> None:
    s = synthesize(
        [
            _raw(file="app/a.py", category="CWE-22", severity="medium", evidence="open(os.path.join(base, name))"),
            _raw(file="app/b.py", category="CWE-22", severity="high", evidence="send_file(request.args['p'])"),
            _raw(file="web/x.js", category="CWE-79", severity="critical", evidence="el.innerHTML = note.title"),
        ]
    )
    blocks = [b.as_json() for b in s.blocks]
    # The same CWE in one directory at unrelated sites is two fixes, so two blocks; most severe first.
    assert [(b["order"], b["severity"], b["effort"], len(b["findings"])) for b in blocks] == [
        (1, "critical", "small", 1),
        (2, "high", "small", 1),
        (3, "medium", "small", 1),
    ]
    assert [b["files"] for b in blocks] == [["web/x.js"], ["app/b.py"], ["app/a.py"]]
    by_id = {f.finding_id: f for f in s.findings}
    assert [by_id[b["findings"][0]].severity for b in blocks] == ["critical", "high", "medium"]
