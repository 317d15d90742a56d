"""Audits that remember: every new audit (full, ``since`` or ``new_audit``) carries forward each cell unchanged
since its latest review in any earlier audit, with its findings; a finding is resolved only for a reason (a
reviewer shown it says fixed or wrong citing the code, or its lines are gone), never because a re-review was
silent; reports and SARIF of an incremental audit are whole, with the same fingerprints."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer, git
from tests.driving import finish
from tests.test_headless import TEMPLATE
from tests.workflows import workflow_steps

CAPS = {"can_dispatch_subagents": True, "max_active_subagents": 4}
VULNERABLE = """    row = conn.execute(
        "SELECT id, username, password_hash FROM users WHERE username = '%s'"
        % username
    ).fetchone()"""
FIXED = """    row = conn.execute(
        "SELECT id, username, password_hash FROM users WHERE username = ?", (username,)
    ).fetchone()"""


def _earlier_refs(packet: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """The earlier findings a packet prompt lists: task id -> [(ref, title)]."""
    prompt = Path(packet["prompt_path"]).read_text()
    out: dict[str, list[tuple[str, str]]] = {}
    for ref, task, title in re.findall(r"^### (E\d+) \(task (T\d+)\): \[\w+\] (.+)$", prompt, re.M):
        out.setdefault(task, []).append((ref, title))
    return out


def _quiet(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "task_id": task["task_id"],
        "status": "reviewed",
        "summary": f"Read {task['file']} lines {task['start_line']}-{task['end_line']} in full under the "
        f"{task['lens']} lens and traced every input to its use.",
        "findings": [],
    }


def _second_review(repo: Path, shown: list[dict[str, Any]]) -> Any:
    """Audit 2's reviewer: says the SQL injection is fixed, citing the new query; silent on everything else
    (it neither reports the other earlier findings again nor answers them)."""
    lines = (repo / "app" / "db.py").read_text().splitlines()
    start = next(i for i, line in enumerate(lines, 1) if "WHERE username = ?" in line)

    def answer(packet: dict[str, Any]) -> list[dict[str, Any]]:
        refs = _earlier_refs(packet)
        shown.append(refs)
        results = []
        for task in packet["tasks"]:
            result = _quiet(task)
            for ref, title in refs.get(task["task_id"], []):
                if "SQL" in title or "injection" in title.lower():
                    result["earlier"] = [
                        {
                            "ref": ref,
                            "verdict": "fixed",
                            "reason": "the username is now passed as a bound parameter, not formatted into the SQL",
                            "cited": {
                                "file": "app/db.py",
                                "start_line": start,
                                "end_line": start,
                                "evidence": lines[start - 1].strip(),
                            },
                        }
                    ]
            results.append(result)
        return results

    return answer


def _report(service: AuditService) -> tuple[dict[str, Any], str, dict[str, Any]]:
    return json.loads(service.report("json")), service.report("md"), json.loads(service.report("sarif"))


def _prints(doc: dict[str, Any]) -> set[str]:
    return {f["fingerprint"] for f in doc["findings"]}


def test_three_audits_resolve_only_what_was_shown_fixed_and_keep_everything_else_whole(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    assert finish(service, service.next_step(CAPS), reviewer.results).step_kind == "present_report"
    first, _, _ = _report(service)
    sqli = next(f for f in first["findings"] if f["file"] == "app/db.py" and f["category_id"] == "CWE-89")

    db = repo / "app" / "db.py"
    db.write_text(db.read_text().replace(VULNERABLE, FIXED))
    jobs = repo / "app" / "jobs.py"
    jobs.write_text(jobs.read_text() + "\n# touched: reviewed again\n")
    git(repo, "commit", "-qam", "fix the lookup, touch the jobs")

    shown: list[dict[str, list[tuple[str, str]]]] = []
    second_step = service.next_step(CAPS, new_audit=True)
    step = finish(service, second_step, _second_review(repo, shown))
    assert step.step_kind == "present_report" and step.completeness == "complete"
    second, md, sarif = _report(service)
    # Only the two changed files were reviewed again; the rest was carried.
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        review = [c for c in tx.cells(audit.audit_id) if c.kind == "review"]
    again = {c.path for c in review if c.state == "reviewed"}
    assert again == {"app/db.py", "app/jobs.py"}, again
    assert all(c.state in ("carried", "reviewed", "not_applicable") for c in review)
    assert any(refs for refs in shown), "the re-review packets listed the earlier findings"
    # The fixed finding is resolved, with its reason; every other finding persists with its fingerprint.
    resolved = second["comparison"]["resolved"]
    assert [r["fingerprint"] for r in resolved] == [sqli["fingerprint"]]
    assert resolved[0]["resolved_because"].startswith("fixed, by the re-review")
    assert "bound parameter" in resolved[0]["resolved_because"]
    assert _prints(second) == _prints(first) - {sqli["fingerprint"]}
    assert "fixed, by the re-review" in md
    kept = [f for f in second["findings"] if f["kept_open"]]
    assert {f["file"] for f in kept} == {"app/db.py", "app/jobs.py"}  # silence kept them open
    carried = [f for f in second["findings"] if f["carried_from"]]
    assert carried and all(f["carried_from"]["audit_id"] == 1 for f in carried)
    assert second["carried"]["cells"] > 0 and "Carried forward" in md
    results = sarif["runs"][0]["results"]
    sarif_prints = {
        r["partialFingerprints"]["auditMcp/v1"] for r in results if "auditMcp/v1" in r["partialFingerprints"]
    }
    assert sarif_prints == _prints(second)
    assert all(r.get("baselineState") == "unchanged" for r in results)

    third = finish(service, service.next_step(CAPS, new_audit=True), reviewer.results)
    assert third.step_kind == "present_report" and third.completeness == "complete"
    last, last_md, _ = _report(service)
    assert _prints(last) == _prints(second)
    assert "This audit reviewed nothing itself" in last_md
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None and audit.audit_id == 3
        runs = tx.runs(audit.audit_id, plan=False)
    assert runs == []  # no run was dispatched: nothing to review


def test_a_since_audit_carries_every_unchanged_finding_so_its_sarif_closes_no_alert(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    assert finish(service, service.next_step(CAPS), reviewer.results).step_kind == "present_report"
    full = json.loads(service.report("sarif"))
    (repo / "app" / "new_module.py").write_text("def added():\n    return 42\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a new module")
    step = finish(service, service.next_step(CAPS, new_audit=True, since="HEAD~1"), reviewer.results)
    assert step.step_kind == "present_report" and step.completeness == "complete"
    pr = json.loads(service.report("sarif"))

    def prints(doc: dict[str, Any]) -> set[str]:
        return {r["partialFingerprints"]["auditMcp/v1"] for r in doc["runs"][0]["results"]}

    assert prints(pr) == prints(full)  # every unchanged finding's result is still there, same fingerprint
    assert pr["runs"][0]["invocations"][0]["executionSuccessful"] is True


def test_new_audit_carries_from_the_latest_review_of_each_file_not_only_the_audit_before(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    assert finish(service, service.next_step(CAPS), reviewer.results).step_kind == "present_report"
    first = _prints(json.loads(service.report("json")))
    (repo / "app" / "new_module.py").write_text("def added():\n    return 42\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a new module")
    # Audit 2 reviews only the new module (since) and is abandoned before it finishes.
    service.next_step(CAPS, new_audit=True, since="HEAD~1")
    service.abandon("interrupted")
    # Audit 3: every file unchanged since audit 1 carries from audit 1, whatever audit 2 did.
    step = service.next_step(CAPS, new_audit=True)
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None and audit.audit_id == 3
        review = [c for c in tx.cells(audit.audit_id) if c.kind == "review"]
    carried = [c for c in review if c.state == "carried"]
    assert {c.path for c in review if c.state != "carried"} == {"app/new_module.py"}
    assert carried and all("from audit 1" in (c.reason or "") for c in carried)
    done = finish(service, step, reviewer.results)
    assert done.step_kind == "present_report"
    assert first <= _prints(json.loads(service.report("json")))


@pytest.mark.parametrize("verdict", ["fixed", "wrong"])
def test_fixed_or_wrong_needs_a_reason_and_a_citation_that_is_in_the_file(
    repo: Path, reviewer: ScriptedReviewer, verdict: str
) -> None:
    service = AuditService(repo)
    assert finish(service, service.next_step(CAPS), reviewer.results).step_kind == "present_report"
    db = repo / "app" / "db.py"
    db.write_text(db.read_text() + "\n# changed\n")
    git(repo, "commit", "-qam", "touch db")
    step = service.next_step(CAPS, new_audit=True)
    while step.step_kind == "dispatch_review":
        plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
        if plan.get("packet_kind") != "review":
            step = finish(service, step, reviewer.results)
            continue
        packet = next(p for p in plan["packets"] if _earlier_refs(p))
        task_id, refs = next(iter(_earlier_refs(packet).items()))
        results = [_quiet(t) for t in packet["tasks"]]
        mine = next(r for r in results if r["task_id"] == task_id)
        mine["earlier"] = [{"ref": refs[0][0], "verdict": verdict}, {"ref": "E999", "verdict": "still_present"}]
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
        text = "\n".join(f"{e.location}: {e.message}" for e in receipt.errors)
        assert not receipt.accepted
        assert "/earlier/0/reason" in text and "/earlier/0/cited" in text and "/earlier/1/ref" in text, text
        mine["earlier"] = [
            {
                "ref": refs[0][0],
                "verdict": verdict,
                "reason": "see the cited lines",
                "cited": {"file": "app/db.py", "start_line": 1, "end_line": 1, "evidence": "no such text in the file"},
            }
        ]
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
        assert not receipt.accepted and any("/earlier/0/cited" in e.location for e in receipt.errors)
        break


def _run_workflow(path: Path, repo: Path, temp: Path, env: dict[str, str], values: dict[str, str]) -> str:
    """Run a shipped workflow's shell steps in order (installing aside, the scripted worker for Claude Code);
    returns what the audit step wrote to GITHUB_OUTPUT."""
    outputs = temp / f"{path.stem}.output"
    for name, step_env, script in workflow_steps(path):
        if name.startswith("Install") or script.strip() == "exit 1":
            continue
        for placeholder, value in values.items():
            script = script.replace(placeholder, value)
        script = re.sub(r"--worker '.*'", lambda _: f"--worker {shlex.quote(TEMPLATE)}", script)
        step_values = {k: v for k, v in step_env.items() if "secrets." not in v}
        for placeholder, value in values.items():
            step_values = {k: v.replace(placeholder, value) for k, v in step_values.items()}
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=repo,
            env={**env, **step_values, "GITHUB_OUTPUT": str(outputs)},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    return outputs.read_text()


def test_the_pull_request_workflow_audits_the_change_and_keeps_every_alert_of_the_base(
    repo: Path, tmp_path: Path
) -> None:
    """The full audit's workflow on main, then the pull-request workflow on a branch (the cache that carries the
    state between them is the runner's temporary folder, kept as it is): the pull request's SARIF, in its own
    category, holds every finding of the base's audit, and only the changed file was reviewed."""
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    (tmp_path / "workers").mkdir()
    env = {**os.environ, "SCRIPTED_WORKER_STATE": str(tmp_path / "workers")}
    docs = Path(__file__).resolve().parent.parent / "docs"
    assert _run_workflow(docs / "github-actions-audit.yml", repo, temp, env, {"${{ runner.temp }}": str(temp)}) == (
        "code=0\n"
    )
    base = json.loads((temp / "audit-mcp" / "report" / "report.sarif").read_text())
    base_sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    git(repo, "checkout", "-qb", "feature")
    (repo / "app" / "new_module.py").write_text("def added():\n    return 42\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a new module")
    values = {"${{ runner.temp }}": str(temp), "${{ github.event.pull_request.base.sha }}": base_sha}
    assert _run_workflow(docs / "github-actions-pr.yml", repo, temp, env, values) == "code=0\n"
    workflow = (docs / "github-actions-pr.yml").read_text()
    assert "category: audit-mcp-pull-request" in workflow and "category: audit-mcp\n" not in workflow
    pr = json.loads((temp / "audit-mcp" / "upload-pr.sarif").read_text())

    def prints(doc: dict[str, Any]) -> set[str]:
        return {r["partialFingerprints"]["auditMcp/v1"] for r in doc["runs"][0]["results"] if not r.get("suppressions")}

    assert prints(pr) == prints(base)
    report = json.loads((temp / "audit-mcp" / "report" / "report.json").read_text())
    assert report["comparison"]["counts"]["resolved"] == 0 and report["carried"]["cells"] > 0
