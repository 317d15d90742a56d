"""Every kind of bad submission is refused with a message a subagent can act on, and changes nothing."""

from __future__ import annotations

import copy
import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import first_review


def _state(service: AuditService) -> str:
    """A digest of every table that holds audit state (the ledger of events aside)."""
    conn = sqlite3.connect(service.store.path)
    try:
        dump = [
            list(conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2"))
            for table in ("cells", "submissions", "findings", "packets", "runs", "failures")
        ]
    finally:
        conn.close()
    return hashlib.sha256(repr(dump).encode()).hexdigest()


@pytest.fixture
def dispatched(repo: Path) -> tuple[AuditService, dict[str, Any]]:
    service = AuditService(repo)
    step = first_review(service)
    assert step.step_kind == "dispatch_review"
    import json

    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    return service, plan


def _packet_with(plan: dict[str, Any], file: str) -> dict[str, Any]:
    return next(p for p in plan["packets"] if any(t["file"] == file for t in p["tasks"]))


def _sqli(answer_key: dict[str, Any]) -> dict[str, Any]:
    return next(i for i in answer_key["issues"] if i["id"] == "sqli-user-lookup")


def _good(reviewer: ScriptedReviewer, packet: dict[str, Any]) -> list[dict[str, Any]]:
    return reviewer.results(packet)


def _first_finding(results: list[dict[str, Any]]) -> dict[str, Any]:
    return next(f for r in results for f in r["findings"] if f["file"] == "app/db.py")


def _mutate(case: str, results: list[dict[str, Any]], repo: Path) -> list[dict[str, Any]]:
    results = copy.deepcopy(results)
    finding = _first_finding(results)
    if case == "fabricated evidence":
        finding["evidence"] = "cursor.execute(user_supplied_sql_from_the_request)"
    elif case == "lines past the end":
        finding["start_line"], finding["end_line"] = 900, 905
    elif case == "file outside the packet":
        finding["file"] = "web/static/render.js"
    elif case == "path escaping the root":
        finding["file"] = "../../etc/passwd"
    elif case == "unknown task":
        results[0]["task_id"] = "T99999"
    elif case == "severity outside the set":
        finding["severity"] = "catastrophic"
    elif case == "vacuous summary":
        results[0]["summary"] = "No obvious issues."
    elif case == "missing task":
        results.pop()
    return results


EXPECTED = {
    "fabricated evidence": ("/evidence", "does not appear in app/db.py"),
    "lines past the end": ("/end_line", "past the end of app/db.py"),
    "file outside the packet": ("/file", "is not a file of packet"),
    "path escaping the root": ("/file", "escapes the repository root"),
    "unknown task": ("/task_id", "is not in packet"),
    "severity outside the set": ("/severity", "is not one of critical, high, medium, low, info"),
    "vacuous summary": ("/summary", "must say what you examined"),
    "missing task": ("/results", "has no result; add one"),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_a_bad_submission_is_refused_with_an_actionable_message_and_changes_nothing(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer, repo: Path, case: str
) -> None:
    service, plan = dispatched
    packet = _packet_with(plan, "app/db.py")
    if case == "file outside the packet":
        assert all(t["file"] != "web/static/render.js" for t in packet["tasks"])
    before = _state(service)
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], _mutate(case, _good(reviewer, packet), repo))
    assert not receipt.accepted
    location, text = EXPECTED[case]
    assert any(e.location.endswith(location) and text in e.message for e in receipt.errors), receipt.errors
    assert "Nothing was recorded" in receipt.next_action
    assert _state(service) == before


def test_an_unknown_run_is_refused_by_name(dispatched: tuple[AuditService, dict[str, Any]]) -> None:
    service, plan = dispatched
    before = _state(service)
    receipt = service.submit_packet("A9-R9", plan["packets"][0]["packet_id"], [])
    assert not receipt.accepted
    assert "run 'A9-R9' is unknown" in receipt.errors[0].message
    assert _state(service) == before


def test_a_corrected_resubmission_is_accepted_and_a_repeat_changes_nothing(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer, repo: Path
) -> None:
    service, plan = dispatched
    packet = _packet_with(plan, "app/db.py")
    good = _good(reviewer, packet)
    assert not service.submit_packet(
        plan["run_id"], packet["packet_id"], _mutate("fabricated evidence", good, repo)
    ).accepted
    first = service.submit_packet(plan["run_id"], packet["packet_id"], good)
    assert first.accepted and not first.duplicate and first.findings_kept >= 2
    after_first = _state(service)
    again = service.submit_packet(plan["run_id"], packet["packet_id"], good)
    assert again.accepted and again.duplicate
    assert _state(service) == after_first


def test_evidence_at_other_lines_is_moved_there_with_a_warning(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer, answer_key: dict[str, Any]
) -> None:
    service, plan = dispatched
    packet = _packet_with(plan, "app/db.py")
    results = _good(reviewer, packet)
    finding = _first_finding(results)
    real = (finding["start_line"], finding["end_line"])
    finding["start_line"], finding["end_line"] = 1, 1
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert receipt.accepted
    assert any(f"lines {real[0]}-{real[1]}" in w.message for w in receipt.warnings), receipt.warnings


def test_a_submission_for_a_merged_run_names_the_open_run(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer
) -> None:
    service, plan = dispatched
    service.merge_and_ingest(plan["run_id"], [])
    step = service.next_step()
    assert step.step_kind == "dispatch_review" and step.run_id != plan["run_id"]
    packet = plan["packets"][0]
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], _good(reviewer, packet))
    assert not receipt.accepted
    assert f"the open run is {step.run_id}" in receipt.errors[0].message


def test_one_refusal_names_every_problem_shape_place_evidence_summary_and_text_at_once(
    dispatched: tuple[AuditService, dict[str, Any]], reviewer: ScriptedReviewer
) -> None:
    """Schema errors do not hide the others: a wrong severity, evidence that is not in the file, a file of
    another packet, a vacuous summary and a lone surrogate are all in the first refusal."""
    service, plan = dispatched
    packet = _packet_with(plan, "app/db.py")
    results = _good(reviewer, packet)
    before = _state(service)
    finding = _first_finding(results)
    finding["severity"] = "urgent"
    finding["evidence"] = "this text appears in no file of the repository at all"
    second = copy.deepcopy(finding)
    second["severity"] = "high"
    second["file"] = "web/server.js" if "web/server.js" not in {t["file"] for t in packet["tasks"]} else "README.md"
    second["description"] = "broken \udc80 text"
    holder = next(r for r in results if finding in r["findings"])
    holder["findings"].append(second)
    quiet = next(r for r in results if not r["findings"] and r is not holder)
    quiet["summary"] = "no obvious issues"
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert not receipt.accepted and _state(service) == before
    text = "\n".join(f"{e.location}: {e.message}" for e in receipt.errors)
    first = f"/results/{results.index(holder)}/findings/{holder['findings'].index(finding)}"
    other = f"/results/{results.index(holder)}/findings/{len(holder['findings']) - 1}"
    assert f"{first}/severity" in text and f"{first}/evidence" in text, text
    assert f"{other}/file" in text and f"{other}/description" in text, text
    assert f"/results/{results.index(quiet)}/summary" in text, text
