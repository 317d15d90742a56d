"""Incremental audits: `since` audits only what changed; a new audit keeps unchanged files' coverage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit_mcp.core.models import Step
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer, git
from tests.driving import finish, first_review, past_context

CAPS = {"can_dispatch_subagents": True}


def _plan(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _finish(service: AuditService, reviewer: ScriptedReviewer, step_plan: str) -> None:
    plan = _plan(step_plan)
    for packet in plan["packets"]:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    service.merge_and_ingest(plan["run_id"], [])


def _files(plan: dict[str, Any]) -> set[str]:
    return {t["file"] for p in plan["packets"] for t in p["tasks"]}


def test_a_new_audit_reviews_only_changed_files_and_keeps_the_rest_with_their_findings(
    repo: Path, reviewer: ScriptedReviewer, answer_key: dict[str, Any]
) -> None:
    service = AuditService(repo)
    _finish(service, reviewer, first_review(service, CAPS).artifact_paths["plan"])
    assert finish(service).step_kind == "present_report"
    cache = repo / "app" / "cache.py"
    cache.write_text(cache.read_text() + "\n# touched\n")
    git(repo, "commit", "-qam", "touch cache")

    exe = str(Path(sys.executable).with_name("audit-mcp"))
    proc = subprocess.run(
        [exe, "next-step", "--new-audit", "--root", str(repo)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    step = json.loads(proc.stdout)
    assert step["step_kind"] == "dispatch_review" and step["run_id"].startswith("A2-")
    if _plan(step["artifact_paths"]["plan"]).get("packet_kind") == "context":
        # The threat model names the root: a changed file refreshes it before the review.
        step = json.loads(past_context(service, Step.model_validate(step)).model_dump_json())
    assert _files(_plan(step["artifact_paths"]["plan"])) == {"app/cache.py"}
    _finish(service, reviewer, step["artifact_paths"]["plan"])
    final = service.next_step()
    assert final.step_kind == "present_report" and final.completeness == "complete"
    report = json.loads(service.report("json"))
    titles = {f["title"] for f in report["findings"]}
    assert {i["title"] for i in answer_key["issues"]} <= titles
    status = service.status().model_dump_json()
    assert "cell(s) carried forward (" in status and "from audit 1)" in status


def test_since_a_git_ref_audits_only_what_changed_after_it(repo: Path, reviewer: ScriptedReviewer) -> None:
    """With no earlier review to carry, what did not change since the ref is left out, each cell named, and the
    audit says it is partial: a since audit proves only what it reviewed."""
    (repo / "app" / "db.py").write_text((repo / "app" / "db.py").read_text() + "\n# reviewed again\n")
    git(repo, "commit", "-qam", "change db")
    (repo / "app" / "new_module.py").write_text("def added():\n    return 42\n")
    (repo / ".audit-mcp.toml").write_text('since = "HEAD~1"\n')
    service = AuditService(repo)
    step = first_review(service, CAPS)
    assert step.step_kind == "dispatch_review"
    assert _files(_plan(step.artifact_paths["plan"])) == {"app/db.py", "app/new_module.py"}
    _finish(service, reviewer, step.artifact_paths["plan"])
    final = finish(service)
    assert final.step_kind == "present_report" and final.completeness == "partial"
    report = service.report()
    assert "`app/auth.py` lines" in report and "unchanged since HEAD~1 and never reviewed by an earlier audit" in report


def test_a_since_that_git_does_not_know_blocks_with_the_fix(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text('since = "no-such-branch"\n')
    step = first_review(AuditService(repo), CAPS)
    assert step.step_kind == "blocked" and "no-such-branch" in step.reason and "not a commit" in step.reason


def test_since_in_a_directory_that_is_not_a_git_repository_blocks_with_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "loose"
    root.mkdir()
    (root / "main.py").write_text("print('hi')\n")
    (root / ".audit-mcp.toml").write_text('since = "main"\n')
    step = first_review(AuditService(root), CAPS)
    assert step.step_kind == "blocked" and "needs a git repository" in step.reason


def test_next_step_since_on_the_command_line_narrows_a_new_audit(repo: Path) -> None:
    (repo / "web" / "api.js").write_text((repo / "web" / "api.js").read_text() + "\n// touched\n")
    git(repo, "commit", "-qam", "touch api")
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    proc = subprocess.run(
        [exe, "next-step", "--since", "HEAD~1", "--host-can-dispatch-subagents", "true", "--root", str(repo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    step = json.loads(proc.stdout)
    # The whole repository is the context a since audit is reviewed in: its threat model comes first.
    assert _plan(step["artifact_paths"]["plan"])["packet_kind"] == "context"
    step = json.loads(past_context(AuditService(repo), Step.model_validate(step)).model_dump_json())
    assert _files(_plan(step["artifact_paths"]["plan"])) == {"web/api.js"}
