"""The context and verification obligations: planned, skipped with a reason, and checked like any submission."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.surfaces.scripted import AnswerKeyReviewer
from audit_mcp.usecases.service import AuditService
from tests.conftest import git

CAPS = {"can_dispatch_subagents": True, "max_active_subagents": 4}


def _plan(service: AuditService, step: Any) -> dict[str, Any]:
    return json.loads(Path(step.artifact_paths["plan"]).read_text())


def _finish(service: AuditService, plan: dict[str, Any], reviewer: AnswerKeyReviewer) -> Any:
    for packet in plan["packets"]:
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
        assert receipt.accepted, receipt.errors
    service.merge_and_ingest(plan["run_id"], [])
    return service.next_step({})


def _to_verification(service: AuditService, reviewer: AnswerKeyReviewer) -> dict[str, Any]:
    step = service.next_step(CAPS)
    while True:
        plan = _plan(service, step)
        if plan["packet_kind"] == "verify":
            return plan
        step = _finish(service, plan, reviewer)


def _context_result(plan: dict[str, Any], reviewer: AnswerKeyReviewer, **model: Any) -> list[dict[str, Any]]:
    results = reviewer.results(plan["packets"][0])
    results[0]["threat_model"] = results[0]["threat_model"] | model
    return results


def test_a_threat_model_naming_a_path_the_repository_lacks_is_refused_where_it_says_so(
    repo: Path, answer_key: dict[str, Any]
) -> None:
    service = AuditService(repo)
    plan = _plan(service, service.next_step(CAPS))
    assert plan["packet_kind"] == "context" and len(plan["packets"]) == 1
    reviewer = AnswerKeyReviewer(answer_key)
    bad = _context_result(
        plan,
        reviewer,
        development_only=[{"path": "tools/seed.py", "why": "a seeding script"}, {"path": "app", "why": "x"}],
        test_only=[{"path": "../etc", "why": "outside"}],
    )
    receipt = service.submit_packet(plan["run_id"], plan["packets"][0]["packet_id"], bad)
    assert not receipt.accepted
    where = {e.location: e.message for e in receipt.errors}
    assert (
        "not a file or directory of this repository's manifest"
        in where["/results/0/threat_model/development_only/0/path"]
    )
    assert "/results/0/threat_model/development_only/1/path" not in where  # a directory of the manifest is fine
    assert "/results/0/threat_model/test_only/0/path" in where
    missing = _context_result(plan, reviewer, entry_points=[])
    receipt = service.submit_packet(plan["run_id"], plan["packets"][0]["packet_id"], missing)
    assert not receipt.accepted and receipt.errors[0].location == "/results/0/threat_model/entry_points"
    receipt = service.submit_packet(
        plan["run_id"], plan["packets"][0]["packet_id"], reviewer.results(plan["packets"][0])
    )
    assert receipt.accepted


@pytest.mark.parametrize(
    ("change", "location", "words"),
    [
        pytest.param(
            {"verdict": "overstated"}, "fair_severity", "needs the fair severity", id="overstated-without-fair"
        ),
        pytest.param(
            {"verdict": "overstated", "fair_severity": "critical"}, "fair_severity", "rated lower", id="not-lower"
        ),
        pytest.param(
            {"verdict": "confirmed", "fair_severity": "low"}, "fair_severity", "use overstated", id="fair-on-confirmed"
        ),
        pytest.param({"verdict": "maybe"}, "verdict", "not one of confirmed", id="unknown-verdict"),
        pytest.param({"cited": []}, "cited", "cite at least one place", id="nothing-cited"),
        pytest.param(
            {"cited": [{"file": "app/db.py", "start_line": 1, "end_line": 1, "quote": "this text is nowhere"}]},
            "cited/0/quote",
            "does not appear",
            id="quote-not-in-file",
        ),
        pytest.param(
            {"cited": [{"file": "nope.py", "start_line": 1, "end_line": 1, "quote": "import sqlite3"}]},
            "cited/0/file",
            "not a readable file",
            id="unknown-file",
        ),
        pytest.param({"rationale": ""}, "rationale", "is required", id="no-rationale"),
        pytest.param({"same_defect": True}, "same_defect", "pair tasks only", id="same-defect-on-a-finding"),
    ],
)
def test_a_verdict_is_checked_like_a_finding_and_refused_with_the_fix(
    repo: Path, answer_key: dict[str, Any], change: dict[str, Any], location: str, words: str
) -> None:
    service = AuditService(repo)
    reviewer = AnswerKeyReviewer(answer_key)
    plan = _to_verification(service, reviewer)
    packet = plan["packets"][0]
    results = reviewer.results(packet)
    index = next(i for i, t in enumerate(packet["tasks"]) if t["file"] == "app/db.py")
    results[index] = results[index] | change
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert not receipt.accepted
    error = next(e for e in receipt.errors if e.location.startswith(f"/results/{index}/"))
    assert error.location == f"/results/{index}/{location}" and words in error.message, receipt.errors


def test_a_citation_quoted_from_other_lines_moves_there_and_a_pair_must_say_whether_it_is_one_defect(
    repo: Path, answer_key: dict[str, Any]
) -> None:
    service = AuditService(repo)
    reviewer = AnswerKeyReviewer(answer_key)
    plan = _to_verification(service, reviewer)
    packet = plan["packets"][0]
    results = reviewer.results(packet)
    sqli = next(i for i, t in enumerate(packet["tasks"]) if t["file"] == "app/db.py")
    results[sqli]["cited"] = [
        {"file": "app/db.py", "start_line": 1, "end_line": 2, "quote": "def find_user_by_name(username):"}
    ]
    pair = next(i for i, t in enumerate(packet["tasks"]) if t.get("subject", "").startswith("pair:"))
    without = dict(results[pair])
    del without["same_defect"]
    receipt = service.submit_packet(
        plan["run_id"], packet["packet_id"], [*results[:pair], without, *results[pair + 1 :]]
    )
    assert not receipt.accepted and receipt.errors[0].location == f"/results/{pair}/same_defect"
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert receipt.accepted
    assert any(w.location == f"/results/{sqli}/cited/0/start_line" and "67-67" in w.message for w in receipt.warnings)


def test_verifiers_never_see_the_reporters_confidence(repo: Path, answer_key: dict[str, Any]) -> None:
    service = AuditService(repo)
    plan = _to_verification(service, AnswerKeyReviewer(answer_key))
    for packet in plan["packets"]:
        prompt = Path(packet["prompt_path"]).read_text()
        assert "confidence" not in prompt.lower().replace("reporter's confidence", "")


def test_the_passes_can_be_turned_off_and_each_says_why_in_the_packets_and_the_report(
    repo: Path, answer_key: dict[str, Any]
) -> None:
    (repo / ".audit-mcp.toml").write_text("context_pass = false\nverification_pass = false\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    service = AuditService(repo)
    reviewer = AnswerKeyReviewer(answer_key)
    step = service.next_step(CAPS)
    plan = _plan(service, step)
    assert plan["packet_kind"] == "review"
    prompt = Path(plan["packets"][0]["prompt_path"]).read_text()
    assert "No threat model was written for this audit: context_pass = false in the session config" in prompt
    while step.step_kind == "dispatch_review":
        step = _finish(service, _plan(service, step), reviewer)
    doc = json.loads(service.report("json"))
    assert doc["threat_model"] is None and doc["context"]["state"] == "not_applicable"
    assert doc["refuted"] == [] and "verify" not in doc["coverage"]["by_kind"]
    assert "verification is off" in service.report("md")


def test_a_higher_threshold_verifies_fewer_findings(repo: Path, answer_key: dict[str, Any]) -> None:
    (repo / ".audit-mcp.toml").write_text('verify_severity = "critical"\n')
    service = AuditService(repo)
    plan = _to_verification(service, AnswerKeyReviewer(answer_key))
    tasks = [t for p in plan["packets"] for t in p["tasks"]]
    # The SQL injection (critical) and the doubtful pair; the high ones are left unverified.
    assert sorted(t["subject"].split(":")[0] for t in tasks) == ["finding", "pair"]


def test_a_tiny_repository_skips_the_context_pass_with_the_reason_recorded(tmp_path: Path) -> None:
    root = tmp_path / "tiny"
    root.mkdir()
    (root / "main.py").write_text("import sys\n\nprint(sys.argv[1:])\n")
    service = AuditService(root)
    plan = _plan(service, service.next_step(CAPS))
    assert plan["packet_kind"] == "review"
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        cell = tx.cells_by_id(audit.audit_id, ["C0001"])["C0001"]
        entries = tx.ledger(audit.audit_id)
    assert cell.state == "not_applicable" and "the repository is tiny (1 file(s), 3 line(s) in scope)" in (
        cell.reason or ""
    )
    assert any("threat model: the repository is tiny" in e["detail"] for e in entries)


def test_a_new_audit_carries_the_threat_model_forward(repo: Path, answer_key: dict[str, Any]) -> None:
    service = AuditService(repo)
    reviewer = AnswerKeyReviewer(answer_key)
    step = service.next_step(CAPS)
    while step.step_kind == "dispatch_review":
        step = _finish(service, _plan(service, step), reviewer)
    step = service.next_step(CAPS, new_audit=True)
    assert step.step_kind in ("dispatch_review", "present_report")
    doc = json.loads(service.report("json"))
    assert doc["context"]["origin"] == "carried forward from audit 1" and doc["threat_model"] is not None
