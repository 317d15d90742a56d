"""merge_and_ingest: failed and missing packets are requeued, then given up on and named in the report."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.errors import NotFoundError
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import finish, first_review, run_id


def _plan(step_plan_path: str) -> dict[str, Any]:
    return json.loads(Path(step_plan_path).read_text())


def test_a_packet_nobody_submitted_is_requeued_and_reissued_with_what_went_wrong(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    plan = _plan(first_review(service, {"can_dispatch_subagents": True}).artifact_paths["plan"])
    first, *rest = plan["packets"]
    for packet in rest:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    summary = service.merge_and_ingest(
        plan["run_id"], [{"packet_id": first["packet_id"], "error": "Request timed out after 600s"}]
    )
    assert summary.packets_failed == 1 and summary.failure_kinds == {"timeout": 1}
    assert summary.tasks_requeued == len(first["tasks"])
    step = service.next_step()
    assert step.step_kind == "dispatch_review"
    again = _plan(step.artifact_paths["plan"])
    assert {t["task_id"] for p in again["packets"] for t in p["tasks"]} == {t["task_id"] for t in first["tasks"]}
    prompt = Path(again["packets"][0]["prompt_path"]).read_text()
    assert "timeout: Request timed out after 600s" in prompt


def test_tasks_that_fail_past_the_retry_budget_are_failed_and_named_as_gaps(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text('lenses = ["security"]\nmax_attempts = 2\n')
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True})
    for attempt in range(2):
        plan = _plan(step.artifact_paths["plan"])
        service.merge_and_ingest(
            plan["run_id"], [{"packet_id": p["packet_id"], "error": f"crashed {attempt}"} for p in plan["packets"]]
        )
        step = service.next_step()
    assert step.step_kind == "present_report"
    assert step.completeness == "partial"
    report = service.report("md")
    assert "**Completeness: partial**" in report
    assert "- failed: `app/db.py` lines 1-" in report and "gave up after 2 attempt(s)" in report


def test_an_authentication_failure_blocks_instead_of_retrying(repo: Path) -> None:
    service = AuditService(repo)
    plan = _plan(first_review(service, {"can_dispatch_subagents": True}).artifact_paths["plan"])
    service.merge_and_ingest(
        plan["run_id"], [{"packet_id": plan["packets"][0]["packet_id"], "error": "401 Unauthorized: invalid x-api-key"}]
    )
    step = service.next_step()
    assert step.step_kind == "blocked" and step.status == "blocked"
    assert "invalid x-api-key" in step.reason
    assert "retry_blocked" in Path(step.prompt_path).read_text()
    resumed = service.next_step(retry_blocked=True)
    assert resumed.step_kind == "dispatch_review"


def test_a_rate_limited_wave_sets_a_cooldown_in_the_next_plan(repo: Path) -> None:
    moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    service = AuditService(repo, clock=lambda: moment)
    plan = _plan(first_review(service, {"can_dispatch_subagents": True}).artifact_paths["plan"])
    service.merge_and_ingest(
        plan["run_id"],
        [
            {"packet_id": p["packet_id"], "error": "Error: 429 rate_limit_error, retry-after: 90"}
            for p in plan["packets"]
        ],
    )
    step = service.next_step()
    assert step.step_kind == "dispatch_review"
    assert _plan(step.artifact_paths["plan"])["cooldown_until"] == "2026-11-30T12:01:30Z"
    assert "Do not launch any subagent before 2026-11-30T12:01:30Z" in Path(step.prompt_path).read_text()
    quota = service.quota()
    assert quota.learned["last_429_at"] == "2026-11-30T12:00:00Z"


def test_merging_twice_changes_nothing_and_unknown_runs_are_refused(repo: Path, reviewer: ScriptedReviewer) -> None:
    service = AuditService(repo)
    plan = _plan(first_review(service, {"can_dispatch_subagents": True}).artifact_paths["plan"])
    for packet in plan["packets"]:
        service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
    first = service.merge_and_ingest(plan["run_id"])
    second = service.merge_and_ingest(plan["run_id"])
    assert first.tasks_covered > 0 and second.already_merged and second.coverage == first.coverage
    with pytest.raises(NotFoundError, match="unknown"):
        service.merge_and_ingest("A1-R99")


def test_a_partly_submitted_run_is_handed_back_with_only_the_missing_packets(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    plan = _plan(first_review(service, {"can_dispatch_subagents": True}).artifact_paths["plan"])
    done = plan["packets"][0]
    service.submit_packet(plan["run_id"], done["packet_id"], reviewer.results(done))
    resumed = AuditService(repo).next_step()  # a restarted host
    assert resumed.run_id == plan["run_id"]
    assert resumed.packets_outstanding == len(plan["packets"]) - 1
    assert done["packet_id"] in Path(resumed.prompt_path).read_text().split("## Launching the packets")[0]


def test_a_new_audit_after_a_finished_one_starts_over_and_its_report_is_provisional(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    (repo / ".audit-mcp.toml").write_text('lenses = ["security"]\ncarry_forward = false\n')
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True})
    plan = _plan(step.artifact_paths["plan"])
    for packet in plan["packets"]:
        service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
    service.merge_and_ingest(plan["run_id"])
    assert finish(service).step_kind == "present_report"
    assert "**Completeness: complete**" in service.report()
    fresh = service.next_step(new_audit=True)
    assert fresh.step_kind == "dispatch_review" and fresh.run_id == run_id(repo, 2, 1)
    assert "**Completeness: unknown**" in service.report()


def test_two_runs_failing_the_same_way_stop_with_a_blocker_instead_of_looping(repo: Path) -> None:
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True})
    for _ in range(2):
        plan = _plan(step.artifact_paths["plan"])
        service.merge_and_ingest(
            plan["run_id"], [{"packet_id": p["packet_id"], "error": "subagent crashed: E42"} for p in plan["packets"]]
        )
        step = service.next_step()
    assert step.step_kind == "blocked"
    assert "failed the same way" in step.reason and "subagent crashed: E42" in step.reason


def test_an_http_date_retry_after_sets_the_cooldown_it_names(repo: Path) -> None:
    moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    service = AuditService(repo, clock=lambda: moment)
    plan = _plan(first_review(service, {"can_dispatch_subagents": True}).artifact_paths["plan"])
    error = "API Error: 429 Too Many Requests (retry-after: Mon, 30 Nov 2026 12:05:00 GMT)"
    service.merge_and_ingest(plan["run_id"], [{"packet_id": p["packet_id"], "error": error} for p in plan["packets"]])
    step = service.next_step()
    assert _plan(step.artifact_paths["plan"])["cooldown_until"] == "2026-11-30T12:05:00Z"
    quota = service.quota()
    assert quota.learned["cooldown_until"] == "2026-11-30T12:05:00Z"
    assert service.active_cooldown() == "2026-11-30T12:05:00Z"
