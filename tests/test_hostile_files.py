"""Broken and hostile files: changed or deleted under review, non-UTF-8, binary, huge, escaping links, no git."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import finish, first_review, past

CAPS = {"can_dispatch_subagents": True}


def _plan(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def _submit_all(service: AuditService, plan: dict[str, Any], reviewer: ScriptedReviewer) -> None:
    for packet in plan["packets"]:
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
        assert receipt.accepted, receipt.errors


def _tasks_of(plan: dict[str, Any], path: str) -> set[tuple[str, int, int]]:
    return {
        (t["lens"], t["start_line"], t["end_line"]) for p in plan["packets"] for t in p["tasks"] if t["file"] == path
    }


def test_a_file_changed_during_review_goes_back_to_pending_and_is_reviewed_again(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    plan = _plan(first_review(service, CAPS).artifact_paths["plan"])
    target = repo / "app" / "utils_text.py"
    lines = len(target.read_text().splitlines())
    _submit_all(service, plan, reviewer)
    with target.open("a") as handle:
        handle.write("\ndef shout(text):\n    return text.upper()\n")

    summary = service.merge_and_ingest(plan["run_id"], [])
    changed = [r for r in summary.requeued if r.file == "app/utils_text.py"]
    assert changed and all("content changed after intake" in r.why for r in changed)
    assert summary.completeness == "unknown" and summary.coverage["pending"] == len(changed)

    step = service.next_step()
    assert step.step_kind == "dispatch_review"
    again = _plan(step.artifact_paths["plan"])
    assert {t["file"] for p in again["packets"] for t in p["tasks"]} == {"app/utils_text.py"}
    assert {end for _, _, end in _tasks_of(again, "app/utils_text.py")} == {lines + 3}
    _submit_all(service, again, reviewer)
    service.merge_and_ingest(again["run_id"], [])
    assert finish(service).step_kind == "present_report"
    assert service.coverage()["completeness"] == "complete"


def test_a_file_changed_after_its_review_is_reviewed_again_before_the_report_and_loses_its_findings(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    plan = _plan(first_review(service, CAPS).artifact_paths["plan"])
    _submit_all(service, plan, reviewer)
    service.merge_and_ingest(plan["run_id"], [])
    target = repo / "app" / "cache.py"
    target.write_text(target.read_text().replace("\n", "\n\n", 1))

    # The verifiers go first (the findings were in when the file changed); the report's check finds the change.
    step = past(service, service.next_step(), "verify")
    assert step.step_kind == "dispatch_review"
    again = _plan(step.artifact_paths["plan"])
    assert {t["file"] for p in again["packets"] for t in p["tasks"]} == {"app/cache.py"}
    status = service.status().model_dump_json()
    assert "app/cache.py: content changed after intake" in status
    report = json.loads(service.report("json"))
    assert report["findings"], "the findings of unchanged files stay"
    assert "app/cache.py" not in {f["file"] for f in report["findings"]}


def test_a_file_deleted_during_review_is_named_as_a_gap_instead_of_counted_as_covered(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    plan = _plan(first_review(service, CAPS).artifact_paths["plan"])
    _submit_all(service, plan, reviewer)
    (repo / "web" / "server.js").unlink()
    service.merge_and_ingest(plan["run_id"], [])
    step = finish(service)
    assert step.step_kind == "present_report" and step.completeness == "partial"
    report = service.report()
    assert "web/server.js" in report and "deleted" in report


def test_hostile_files_in_a_directory_that_is_not_a_git_repository(
    plain_repo: Path, reviewer: ScriptedReviewer, tmp_path: Path
) -> None:
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("TOP-SECRET-TOKEN-5c1f\n")
    (plain_repo / "leak.py").symlink_to(secret)
    (plain_repo / "app" / "latin1.py").write_bytes("# café au lait\nNAME = 'Zoë'\n".encode("latin-1"))
    (plain_repo / "app" / "blob.py").write_bytes(b"\x7fELF\0\0\x01binary")
    (plain_repo / "app" / "huge.py").write_text("x = 1\n" * 400_000)
    (plain_repo / "app" / "empty.py").write_text("")
    os.mkfifo(plain_repo / "app" / "pipe.py")  # reading it would block forever
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    (outside / "stolen.py").write_text("SECRET = 'TOP-SECRET-TOKEN-5c1f'\n")
    (plain_repo / "linked").symlink_to(outside, target_is_directory=True)

    service = AuditService(plain_repo)
    step = first_review(service, CAPS)
    assert step.step_kind == "dispatch_review"
    plan = _plan(step.artifact_paths["plan"])
    files = {t["file"] for p in plan["packets"] for t in p["tasks"]}
    assert "app/latin1.py" in files
    assert not files & {"leak.py", "app/blob.py", "app/huge.py", "app/empty.py", "app/pipe.py"}
    assert not any(f.startswith("linked/") for f in files)
    for packet in plan["packets"]:
        if "app/latin1.py" in {t["file"] for t in packet["tasks"]}:
            assert "untrusted" in Path(packet["prompt_path"]).read_text()
    _submit_all(service, plan, reviewer)
    service.merge_and_ingest(plan["run_id"], [])
    assert finish(service).step_kind == "present_report"
    report = service.report()
    for path, why in [
        ("leak.py", "leaves the repository root"),
        ("app/blob.py", "binary"),
        ("app/huge.py", "oversize"),
        ("app/empty.py", "empty"),
        ("app/pipe.py", "not a regular file"),
    ]:
        assert f"`{path}`: " in report and why in report
    artifacts = [p for p in service.artifacts_dir.rglob("*") if p.is_file()]
    assert artifacts and not any(b"TOP-SECRET-TOKEN" in p.read_bytes() for p in artifacts)
