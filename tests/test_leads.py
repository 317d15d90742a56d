"""Static-analyzer alerts become leads: carried by the packet of their file, judged by a reviewer, reported."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.errors import ConfigError
from audit_mcp.findings.analyzers import run_analyzers
from audit_mcp.findings.leads import import_leads, lead_report, parse_sarif
from audit_mcp.store.records import Lead, Verdict
from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, ScriptedReviewer
from tests.driving import carried, cli, finish, first_review, judging, past_context_json
from tests.sarif_checks import github_problems, schema_errors

BANDIT_SARIF = FIXTURES / "planted_app.bandit.sarif"


def test_imported_bandit_alerts_travel_with_their_files_and_the_report_shows_the_verdicts(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, step = cli(
        capsys,
        "next-step",
        "--root",
        root,
        "--host-can-dispatch-subagents",
        "true",
        "--analyzer-sarif",
        str(BANDIT_SARIF),
    )
    step = past_context_json(repo, step)
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    seen: dict[str, str] = {}
    for packet in plan["packets"]:
        prompt = Path(packet["prompt_path"]).read_text()
        files = {t["file"] for t in packet["tasks"]}
        for lead_id, (file, _line, _rule) in carried(prompt).items():
            assert file in files, (lead_id, packet["packet_id"])
            seen[lead_id] = file
        if "app/db.py" in files:
            assert "Bandit B608 (CWE-89)" in prompt
            unjudged = tmp_path / "unjudged.json"
            unjudged.write_text(json.dumps(reviewer.results(packet)))
            code, receipt = cli(
                capsys,
                "submit-packet",
                "--root",
                root,
                "--run-id",
                plan["run_id"],
                "--packet-id",
                packet["packet_id"],
                "--results",
                str(unjudged),
            )
            assert code == 2
            assert any("has no verdict" in e["message"] and "B608" in e["message"] for e in receipt["errors"])
        answer = tmp_path / f"{packet['packet_id']}.json"
        answer.write_text(json.dumps(judging(reviewer, prompt, packet)))
        code, receipt = cli(
            capsys,
            "submit-packet",
            "--root",
            root,
            "--run-id",
            plan["run_id"],
            "--packet-id",
            packet["packet_id"],
            "--results",
            str(answer),
        )
        assert code == 0 and receipt["accepted"], receipt
    assert sorted(seen.values()) == ["app/config.py", "app/db.py", "app/jobs.py"]
    assert cli(capsys, "merge-and-ingest", "--root", root, "--run-id", plan["run_id"])[0] == 0
    finish(AuditService(repo))  # the second opinions on the critical and high findings
    code, step = cli(capsys, "next-step", "--root", root)
    assert step["step_kind"] == "present_report"

    code, doc = cli(capsys, "report", "--root", root, "--format", "json")
    leads = {x["rule_id"]: x for x in doc["leads"]}
    assert set(leads) == {"B105", "B608", "B110"}
    assert {x["status"] for x in leads.values()} == {"confirmed"}
    sqli = next(f for f in doc["findings"] if f["category"] == "CWE-89")
    assert leads["B608"]["findings"] == [sqli["id"]] and leads["B608"]["cwes"] == ["89"]
    assert sqli["confirms_leads"] == [leads["B608"]["lead_id"]]
    code, markdown = cli(capsys, "report", "--root", root)
    assert (
        "## Analyzer leads" in markdown
        and "3 alert(s) from Bandit, each checked by a reviewer: 3 confirmed" in markdown
    )
    assert re.search(rf"\| L\d{{3}} \| Bandit B608 \| `app/db.py:70` \| confirmed \| {sqli['id']} \|", markdown)
    code, sarif = cli(capsys, "report", "--root", root, "--format", "sarif")
    assert schema_errors(sarif) == [] and github_problems(sarif) == []
    result = next(r for r in sarif["runs"][0]["results"] if r["ruleId"] == "cwe-89")
    assert result["properties"]["confirmsLeads"] == [f"{leads['B608']['lead_id']} Bandit B608"]


def test_an_analyzer_named_in_the_config_runs_and_its_alerts_match_the_committed_fixture(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text('[analyzers]\nrun = ["bandit"]\n')
    service = AuditService(repo)
    first_review(service, {"can_dispatch_subagents": True})
    assert (repo / ".audit-mcp" / "analyzers" / "bandit.sarif").is_file()
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        live = {(x.rule_id, x.path, x.start_line) for x in tx.leads(audit.audit_id)}
        intake = next(e for e in tx.ledger(audit.audit_id) if e["action"] == "intake")
    fixture = import_leads([(str(BANDIT_SARIF), BANDIT_SARIF.read_bytes())], repo, lambda _path: True).leads
    assert live == {(x.rule_id, x.path, x.start_line) for x in fixture}
    assert "3 analyzer lead(s) imported; bandit ran" in intake["detail"]


class _Done:
    def __init__(self, code: int, stderr: str = "") -> None:
        self.returncode, self.stderr = code, stderr


def test_an_analyzer_that_is_missing_fails_or_hangs_is_skipped_with_a_note(tmp_path: Path) -> None:
    def runner(argv: list[str], **_kw: Any) -> _Done:
        if "check" in argv:
            raise subprocess.TimeoutExpired(argv, 1)
        return _Done(2, "error: bad option")

    runs = run_analyzers(
        ["bandit", "ruff"], tmp_path, tmp_path / "out", ["app.py"], which=lambda name: f"/bin/{name}", runner=runner
    )
    assert [(r.sarif, r.note) for r in runs] == [
        (None, "bandit failed with exit code 2 (error: bad option); skipped"),
        (None, "ruff ran over 300s; skipped"),
    ]
    missing = run_analyzers(["bandit"], tmp_path, tmp_path / "out", ["app.py"], which=lambda _name: None, runner=runner)
    assert missing[0].note == "bandit is not installed; skipped"
    planted = tmp_path / "repo" / "bandit"
    planted.parent.mkdir()
    planted.write_text("#!/bin/sh\n")
    refused = run_analyzers(
        ["bandit"], planted.parent, tmp_path / "out", ["app.py"], which=lambda _name: str(planted), runner=runner
    )
    assert refused[0].sarif is None and "inside the audited repository; refused" in refused[0].note


def test_a_missing_analyzer_file_blocks_the_audit_with_a_fixable_message(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text('[analyzers]\nsarif = ["reports/semgrep.sarif"]\n')
    step = first_review(AuditService(repo), {"can_dispatch_subagents": True})
    assert step.step_kind == "blocked"
    assert "cannot read analyzer SARIF" in step.reason and "analyzers.sarif" in step.reason


def test_verdicts_must_name_a_carried_lead_of_the_task_file_with_a_known_verdict(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path
) -> None:
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True}, analyzer_sarif=[BANDIT_SARIF])
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    packet = next(p for p in plan["packets"] if any(t["file"] == "app/db.py" for t in p["tasks"]))
    prompt = Path(packet["prompt_path"]).read_text()
    results = judging(reviewer, prompt, packet)
    judged = next(r for r in results if r.get("leads"))
    judged["leads"][0]["verdict"] = "maybe"
    judged["leads"].append({"lead_id": "L999", "verdict": "refuted", "reason": "no such lead"})
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    messages = "\n".join(f"{e.location}: {e.message}" for e in receipt.errors)
    assert not receipt.accepted
    assert "/leads/0/verdict: verdict 'maybe' is not one of confirmed, refuted" in messages
    assert "/leads/1/lead_id: lead 'L999' is not carried by packet" in messages
    service.next_step({}, analyzer_sarif=[BANDIT_SARIF])  # what the audit started with: a resumed call repeats it
    other = tmp_path / "other.sarif"
    other.write_bytes(BANDIT_SARIF.read_bytes())
    with pytest.raises(ConfigError, match="read when an audit starts"):
        service.next_step({}, analyzer_sarif=[other])


def test_sarif_locations_map_to_repo_paths_and_foreign_places_are_dropped(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    doc = {
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "Semgrep",
                        "rules": [
                            {
                                "id": "py.eval",
                                "defaultConfiguration": {"level": "error"},
                                "properties": {"tags": ["CWE-95: Eval Injection"]},
                            }
                        ],
                    }
                },
                "results": [
                    {
                        "ruleId": "py.eval",
                        "message": {"text": "eval of `input` | bad\nsecond line"},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": "src/a.py", "uriBaseId": "%SRCROOT%"},
                                    "region": {"startLine": 4},
                                }
                            }
                        ],
                    },
                    {
                        "ruleId": "py.eval",
                        "message": {"text": "absolute"},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": (root / "src" / "b.py").as_uri()},
                                    "region": {"startLine": 2, "endLine": 3},
                                }
                            }
                        ],
                    },
                    {
                        "ruleId": "py.eval",
                        "message": {"text": "elsewhere"},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": "../other/c.py"}}}],
                    },
                    {
                        "ruleId": "py.eval",
                        "message": {"text": "vendored"},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": "vendor/x.py"}}}],
                    },
                    {
                        "ruleId": "py.eval",
                        "kind": "pass",
                        "message": {"text": "a passing check"},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": "src/a.py"}}}],
                    },
                ],
            }
        ]
    }
    leads, dropped = parse_sarif(doc, "semgrep.sarif", root, lambda path: path.startswith("src/"))
    assert [(x.path, x.start_line, x.end_line, x.level, x.cwes) for x in leads] == [
        ("src/a.py", 4, 4, "error", ("95",)),
        ("src/b.py", 2, 3, "error", ("95",)),
    ]
    assert "|" not in leads[0].message and "\n" not in leads[0].message and "`" not in leads[0].message
    assert dropped == {"outside the repository": 1, "file not in scope": 1}


def test_a_lead_is_disputed_when_reviewers_disagree_and_unchecked_without_a_verdict() -> None:
    leads = [
        Lead("L001", "Bandit", "B105", "a.py", 3, 3, "note", "m"),
        Lead("L002", "Bandit", "B110", "a.py", 9, 10, "note", "m"),
        Lead("L003", "Bandit", "B608", "b.py", 1, 1, "warning", "m"),
    ]
    verdicts = [
        Verdict("L001", "confirmed", "r", "P1", "T1"),
        Verdict("L001", "refuted", "r", "P1", "T2"),
        Verdict("L002", "refuted", "r", "P1", "T1"),
    ]
    report = lead_report(leads, verdicts, [("F001", "a.py", 8, 9)])
    assert [(x["status"], x["findings"]) for x in report] == [
        ("disputed", []),
        ("refuted", ["F001"]),
        ("unchecked", []),
    ]


def test_a_lead_whose_file_could_not_be_reviewed_waits_for_the_next_run_and_judged_leads_do_not_return(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True}, analyzer_sarif=[BANDIT_SARIF])
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    for packet in plan["packets"]:
        results = judging(reviewer, Path(packet["prompt_path"]).read_text(), packet)
        for task, result in zip(packet["tasks"], results, strict=True):
            if task["file"] == "app/db.py":
                result.update(status="could_not_review", reason="ran out of budget", findings=[])
                result.pop("leads", None)
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
        assert receipt.accepted, receipt.errors
    service.merge_and_ingest(plan["run_id"], [])
    step = service.next_step({})
    assert step.step_kind == "dispatch_review" and step.run_id != plan["run_id"]
    again = json.loads(Path(step.artifact_paths["plan"]).read_text())
    leads: dict[str, tuple[str, int, str]] = {}
    for packet in again["packets"]:
        leads |= carried(Path(packet["prompt_path"]).read_text())
    assert [(file, rule) for file, _line, rule in leads.values()] == [("app/db.py", "Bandit B608 (CWE-89)")]
    status = {x["rule_id"]: x["status"] for x in json.loads(service.report("json"))["leads"]}
    assert status == {"B105": "confirmed", "B608": "unchecked", "B110": "confirmed"}
