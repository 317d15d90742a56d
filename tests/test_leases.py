"""Leases and resume: expired packets return to the queue under new ids; a restarted host gets only what is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import finish, first_review, past_context_json

CAPS = {"can_dispatch_subagents": True}


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _plan(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def test_an_expired_lease_returns_its_tasks_under_a_new_packet_and_the_late_submission_names_it(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    (repo / ".audit-mcp.toml").write_text("lease_seconds = 600\n")
    clock = FakeClock()
    service = AuditService(repo, clock=clock)
    plan = _plan(first_review(service, CAPS).artifact_paths["plan"])
    assert plan["lease_expires_at"] == "2026-01-01T00:10:00Z"
    done, late, *others = plan["packets"]
    assert service.submit_packet(plan["run_id"], done["packet_id"], reviewer.results(done)).accepted

    clock.advance(599)
    step = service.next_step()
    assert step.run_id == plan["run_id"] and step.packets_outstanding == 1 + len(others)

    clock.advance(2)
    step = service.next_step()
    assert step.step_kind == "dispatch_review" and step.run_id != plan["run_id"]
    again = _plan(step.artifact_paths["plan"])
    reissued = {t["task_id"] for p in again["packets"] for t in p["tasks"]}
    assert reissued == {t["task_id"] for p in [late, *others] for t in p["tasks"]}
    assert not {p["packet_id"] for p in again["packets"]} & {p["packet_id"] for p in plan["packets"]}
    assert "lease expired" in Path(again["packets"][0]["prompt_path"]).read_text()

    receipt = service.submit_packet(plan["run_id"], late["packet_id"], reviewer.results(late))
    assert not receipt.accepted
    holder = next(
        p["packet_id"]
        for p in again["packets"]
        if {t["task_id"] for t in p["tasks"]} & {t["task_id"] for t in late["tasks"]}
    )
    assert holder in receipt.errors[0].message and "superseded" in receipt.errors[0].message

    coverage = service.coverage()["by_kind"]["review"]
    assert coverage.get("reviewed") == len(done["tasks"])
    for packet in again["packets"]:
        assert service.submit_packet(again["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    service.merge_and_ingest(again["run_id"], [])
    assert finish(service).step_kind == "present_report"
    assert service.coverage()["completeness"] == "complete"


def test_a_lease_still_running_keeps_the_run_and_a_submission_after_expiry_but_before_next_step_counts(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    clock = FakeClock()
    service = AuditService(repo, clock=clock)
    plan = _plan(first_review(service, CAPS).artifact_paths["plan"])
    clock.advance(7200 + 1)  # the default lease is two hours
    for packet in plan["packets"]:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    assert finish(service).step_kind == "present_report"


def test_a_restarted_host_gets_back_only_the_missing_packets_of_the_run_in_flight(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path
) -> None:
    exe = str(Path(sys.executable).with_name("audit-mcp"))

    def cli(*args: str) -> dict[str, Any]:
        proc = subprocess.run([exe, *args, "--root", str(repo)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    step = past_context_json(repo, cli("next-step", "--host-can-dispatch-subagents", "true"))
    plan = _plan(step["artifact_paths"]["plan"])
    first = plan["packets"][0]
    results = tmp_path / "first.json"
    results.write_text(json.dumps(reviewer.results(first)))
    cli("submit-packet", "--run-id", plan["run_id"], "--packet-id", first["packet_id"], "--results", str(results))

    # A new process with no memory of the conversation: the same run, minus what was accepted.
    resumed = cli("next-step")
    assert resumed["step_kind"] == "dispatch_review" and resumed["run_id"] == plan["run_id"]
    assert resumed["packets_outstanding"] == len(plan["packets"]) - 1
    prompt = Path(resumed["prompt_path"]).read_text()
    for packet in plan["packets"][1:]:
        assert packet["packet_id"] in prompt


@pytest.mark.anyio
async def test_over_mcp_an_expired_packet_is_reissued_and_its_late_submission_names_the_new_one(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    clock = FakeClock()
    async with Client(build_server(repo, clock=clock)) as client:
        step = (await client.call_tool("next_step", {"host_can_dispatch_subagents": True})).structured_content
        assert step is not None
        plan = json.loads((await client.read_resource(f"audit://runs/{step['run_id']}/dispatch-plan")).contents[0].text)  # type: ignore[union-attr]
        clock.advance(7200)
        again = (await client.call_tool("next_step", {})).structured_content
        assert again is not None and again["step_kind"] == "dispatch_review" and again["run_id"] != plan["run_id"]
        packet = plan["packets"][0]
        late = await client.call_tool(
            "submit_packet",
            {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
        )
        receipt = late.structured_content
        assert receipt is not None and not receipt["accepted"]
        assert again["run_id"] in receipt["errors"][0]["message"]
        assert "superseded" in receipt["errors"][0]["message"]


def _through_review(service: AuditService, reviewer: ScriptedReviewer) -> dict[str, Any]:
    """Answer the context and review runs; the plan of the verification run that follows."""
    step = service.next_step(CAPS)
    while True:
        plan = _plan(step.artifact_paths["plan"])
        if plan["packet_kind"] == "verify":
            return plan
        for packet in plan["packets"]:
            assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
        service.merge_and_ingest(plan["run_id"], [])
        step = service.next_step()


@pytest.mark.parametrize("kind", ["context", "verify"])
def test_an_expired_context_or_verification_packet_is_reissued_and_its_late_answer_names_the_new_one(
    repo: Path, reviewer: ScriptedReviewer, kind: str
) -> None:
    (repo / ".audit-mcp.toml").write_text("lease_seconds = 600\n")
    clock = FakeClock()
    service = AuditService(repo, clock=clock)
    plan = (
        _plan(service.next_step(CAPS).artifact_paths["plan"])
        if kind == "context"
        else _through_review(service, reviewer)
    )
    assert plan["packet_kind"] == kind
    clock.advance(601)
    step = service.next_step()
    again = _plan(step.artifact_paths["plan"])
    assert again["packet_kind"] == kind and again["run_id"] != plan["run_id"]
    tasks = {t["task_id"] for p in plan["packets"] for t in p["tasks"]}
    assert {t["task_id"] for p in again["packets"] for t in p["tasks"]} == tasks
    assert all("lease expired" in Path(p["prompt_path"]).read_text() for p in again["packets"])
    late = service.submit_packet(plan["run_id"], plan["packets"][0]["packet_id"], reviewer.results(plan["packets"][0]))
    assert not late.accepted and "superseded" in late.errors[0].message
    assert again["packets"][0]["packet_id"] in late.errors[0].message
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        attempts = {c.attempts for c in tx.cells_by_id(audit.audit_id, sorted(tasks)).values()}
    assert attempts == {1}
    step = service.next_step()
    while step.step_kind == "dispatch_review":
        current = _plan(step.artifact_paths["plan"])
        for packet in current["packets"]:
            assert service.submit_packet(current["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
        service.merge_and_ingest(current["run_id"], [])
        step = service.next_step()
    assert step.step_kind == "present_report" and service.coverage()["completeness"] == "complete"


def test_a_verification_that_fails_past_its_attempts_is_a_named_gap_and_the_audit_is_partial(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    (repo / ".audit-mcp.toml").write_text("max_attempts = 2\n")
    service = AuditService(repo)
    plan = _through_review(service, reviewer)
    for attempt in range(2):
        failures = [
            {"packet_id": p["packet_id"], "error": f"the verifier crashed ({attempt})"} for p in plan["packets"]
        ]
        service.merge_and_ingest(plan["run_id"], failures)
        step = service.next_step()
        if attempt == 0:
            plan = _plan(step.artifact_paths["plan"])
            assert plan["packet_kind"] == "verify"
    assert step.step_kind == "present_report" and step.completeness == "partial"
    doc = json.loads(service.report("json"))
    gaps = [g for g in doc["gaps"]["cells"] if g["lens"] == "verify"]
    assert len(gaps) == 4 and all("gave up after 2 attempt(s)" in g["reason"] for g in gaps)
    assert {f["status"] for f in doc["findings"]} == {"unverified"}
    sarif = json.loads(service.report("sarif"))
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert sum(1 for n in notes if n.get("properties", {}).get("lens") == "verify") == 4
