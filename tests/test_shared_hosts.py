"""Hosts sharing one audit through PostgreSQL: each reviews only the packets it claimed, a lapsed claim
goes to another host as the packet's next attempt, and a late submission from the old holder is refused."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mcp import Client

from audit_mcp.core.models import Step
from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases import claiming, snapshot
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CAPS = {"can_dispatch_subagents": True, "max_active_subagents": 2}


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


# Review runs only, except where a test says otherwise: the claims below are counted run by run.
REVIEW_ONLY = "context_pass = false\nverification_pass = false\n"


@pytest.fixture(autouse=True)
def _claim_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims lapse after 300 s here; the lease is the user's to set (a repository's own config may not hold
    [shared])."""
    monkeypatch.setenv("AUDIT_MCP_CLAIM_LEASE_SECONDS", "300")


def _checkout(origin: Path, where: Path, passes: str = REVIEW_ONLY) -> Path:
    """A clone of ``origin`` at its own path, as a host on another machine would have it."""
    subprocess.run(["git", "clone", "-q", str(origin), str(where)], check=True, capture_output=True)
    (where / ".audit-mcp.toml").write_text(passes + "max_packet_tokens = 4000\n")
    return where


@pytest.fixture
def hosts(repo: Path, tmp_path: Path, pg_url: str) -> tuple[AuditService, AuditService, Clock]:
    clock = Clock()
    a = AuditService(_checkout(repo, tmp_path / "host-a" / "app"), store=pg_url, clock=clock)
    b = AuditService(_checkout(repo, tmp_path / "host-b" / "src" / "app"), store=pg_url, clock=clock)
    return a, b, clock


def _packets(step: Step) -> list[dict[str, object]]:
    """The packets the step hands this host (the waves table of its prompt lists each one)."""
    text = Path(step.prompt_path).read_text()
    return [{"packet_id": line.split("`")[1]} for line in text.splitlines() if line.startswith("- `")]


def _plan(service: AuditService, run_id: str) -> dict[str, dict[str, object]]:
    with service.store.read() as tx:
        run = tx.run(run_id)
        assert run is not None
        return {p["packet_id"]: p for p in run.plan["packets"]}


def test_two_hosts_with_different_checkouts_claim_disjoint_packets_of_one_audit(
    hosts: tuple[AuditService, AuditService, Clock], reviewer: ScriptedReviewer
) -> None:
    a, b, _ = hosts
    step_a = a.next_step(CAPS)
    step_b = b.next_step(CAPS)
    assert step_a.step_kind == step_b.step_kind == "dispatch_review"
    assert step_a.run_id == step_b.run_id  # one audit, one run, found from two checkout paths
    mine_a = {p["packet_id"] for p in _packets(step_a)}
    mine_b = {p["packet_id"] for p in _packets(step_b)}
    assert len(mine_a) == len(mine_b) == 2 and not mine_a & mine_b
    for packet_id in mine_b:  # B's prompts are B's own: its root, its artifacts directory
        prompt = b.packet_prompt_path(str(step_b.run_id), str(packet_id)).read_text()
        assert str(b.root) in prompt and str(a.root) not in prompt
    plan = _plan(a, str(step_a.run_id))
    stolen = sorted(mine_a)[0]
    refused = b.submit_packet(str(step_a.run_id), str(stolen), reviewer.results(plan[str(stolen)]))
    assert not refused.accepted
    assert str(a.root) in refused.errors[0].message and "attempt 1" in refused.errors[0].message


def test_a_lapsed_claim_goes_to_another_host_and_the_late_submission_is_refused_naming_its_attempt(
    hosts: tuple[AuditService, AuditService, Clock], reviewer: ScriptedReviewer
) -> None:
    a, b, clock = hosts
    step_a = a.next_step(CAPS)
    run_id = str(step_a.run_id)
    plan = _plan(a, run_id)
    held_by_a = sorted(str(p["packet_id"]) for p in _packets(step_a))
    clock.now = START + timedelta(seconds=301)  # A went silent past its lease
    step_b = b.next_step({**CAPS, "max_active_subagents": 16})
    taken = {str(p["packet_id"]) for p in _packets(step_b)}
    assert set(held_by_a) <= taken  # B took A's lapsed packets as their second attempt
    late = a.submit_packet(run_id, held_by_a[0], reviewer.results(plan[held_by_a[0]]))
    assert not late.accepted
    message = late.errors[0].message
    assert "attempt 2" in message and str(b.root) in message and "claim lapsed" in message
    for packet_id in sorted(taken):
        assert b.submit_packet(run_id, packet_id, reviewer.results(plan[packet_id])).accepted
    # Every packet answered by the host that held it: the run merges, and the audit goes on to the end.
    step = b.next_step()
    for _ in range(20):
        if step.step_kind == "present_report":
            break
        assert step.step_kind == "dispatch_review", step.reason
        plan = _plan(b, str(step.run_id))
        for p in _packets(step):
            assert b.submit_packet(
                str(step.run_id), str(p["packet_id"]), reviewer.results(plan[str(p["packet_id"])])
            ).accepted
        step = b.next_step()
    assert step.step_kind == "present_report" and step.completeness == "complete"
    finished = a.next_step()  # A finds the same finished audit, and its own copy of the report
    assert finished.step_kind == "present_report" and finished.completeness == "complete"
    assert "## Coverage" in Path(finished.artifact_paths["report"]).read_text()


def test_the_host_whose_intake_made_the_snapshot_does_not_read_its_checkout_again_and_another_host_does(
    hosts: tuple[AuditService, AuditService, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = hosts
    read: list[Path] = []
    real = snapshot.build_manifest

    def counted(root: Path, *args: object, **kwargs: object) -> object:
        read.append(root)
        return real(root, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot, "build_manifest", counted)
    first = a.next_step(CAPS)
    assert first.step_kind == "dispatch_review" and _packets(first)
    assert read == []  # A's intake read its checkout into the snapshot moments ago
    second = b.next_step(CAPS)
    assert second.step_kind == "dispatch_review" and _packets(second)
    assert read == [b.root]  # B's checkout is compared with it, once


def test_a_host_whose_checkout_differs_from_the_snapshot_is_refused_with_the_difference_named(
    hosts: tuple[AuditService, AuditService, Clock], tmp_path: Path, repo: Path
) -> None:
    a, _, clock = hosts
    first = a.next_step(CAPS)
    assert first.step_kind == "dispatch_review"
    other = _checkout(repo, tmp_path / "host-c" / "app")
    (other / "app" / "extra.py").write_text("def added(x):\n    return x\n")
    (other / "README.md").write_text("changed\n")
    c = AuditService(other, store=a.store_url, clock=clock)
    step = c.next_step(CAPS)
    assert step.step_kind == "blocked"
    assert "differs from the snapshot of audit 1" in step.reason
    assert "changed 1 file(s) (README.md)" in step.reason and "added 1 file(s) (app/extra.py)" in step.reason
    with c.store.read() as tx:  # nothing was claimed for it
        claims = tx.claims(str(first.run_id))
    assert claims and all(claim.holder != claiming.host_id(c) for claim in claims)


@pytest.mark.anyio
async def test_a_host_serves_the_plan_and_any_packet_prompt_of_a_shared_run_from_the_store(
    hosts: tuple[AuditService, AuditService, Clock],
) -> None:
    a, b, _ = hosts
    step = a.next_step(CAPS)
    run_id = str(step.run_id)
    theirs = sorted(_plan(a, run_id))[-1]  # a packet B never claimed
    assert not b.plan_path(run_id).exists() and not b.packet_prompt_path(run_id, theirs).exists()
    async with Client(build_server(b.root, store=b.store_url)) as client:
        plan = await client.read_resource(f"audit://runs/{run_id}/dispatch-plan")
        prompt = await client.read_resource(f"audit://runs/{run_id}/packets/{theirs}/prompt")
    assert json.loads(plan.contents[0].text)["run_id"] == run_id  # type: ignore[union-attr]
    text = prompt.contents[0].text  # type: ignore[union-attr]
    assert theirs in text and str(b.root) in text and str(a.root) not in text


def test_a_host_with_nothing_to_claim_waits_and_its_merge_does_not_end_the_run(
    hosts: tuple[AuditService, AuditService, Clock], reviewer: ScriptedReviewer
) -> None:
    a, b, _ = hosts
    for host in (a, b):  # a small run, so that one host can hold all of it
        config = host.root / ".audit-mcp.toml"
        config.write_text("max_packets_per_run = 6\n" + config.read_text())
    step_a = a.next_step({**CAPS, "max_active_subagents": 16})  # A takes every packet of the run
    run_id = str(step_a.run_id)
    assert len(step_a.packet_ids or []) == 6 and set(step_a.packet_ids or []) == set(_plan(a, run_id))
    waiting = b.next_step(CAPS)
    assert waiting.step_kind == "wait" and waiting.retry_after_seconds
    assert str(a.root) in waiting.reason and "call next_step" in Path(waiting.prompt_path).read_text()
    plan = _plan(a, run_id)
    first, *rest = sorted(plan)
    assert a.submit_packet(run_id, first, reviewer.results(plan[first])).accepted
    summary = a.merge_and_ingest(run_id, [{"packet_id": rest[0], "error": "subagent crashed"}])
    assert summary.waiting_packets == len(rest) - 1 and summary.packets_merged == 0  # the run stays open
    with a.store.read() as tx:
        run = tx.run(run_id, plan=False)
        assert run is not None and run.state == "open"
    for packet_id in rest[1:]:
        assert a.submit_packet(run_id, packet_id, reviewer.results(plan[packet_id])).accepted
    done = b.merge_and_ingest(run_id, [])  # every packet is in: any host's merge ends the run
    assert done.packets_merged == len(plan) - 1 and done.packets_failed == 1


@pytest.mark.anyio
async def test_the_context_packet_is_claimed_by_one_host_and_its_threat_model_reaches_the_others_prompts(
    repo: Path, tmp_path: Path, pg_url: str, reviewer: ScriptedReviewer
) -> None:
    clock = Clock()
    a = AuditService(_checkout(repo, tmp_path / "host-a" / "app", passes=""), store=pg_url, clock=clock)
    b = AuditService(_checkout(repo, tmp_path / "host-b" / "src" / "app", passes=""), store=pg_url, clock=clock)
    step_a = a.next_step(CAPS)
    run_id = str(step_a.run_id)
    (packet,) = _plan(a, run_id).values()
    assert packet["packet_kind"] == "context" and step_a.packet_ids == [packet["packet_id"]]
    assert b.next_step(CAPS).step_kind == "wait"  # the run's one packet is A's
    # B, which did not dispatch the run, renders the context packet's prompt for its own checkout.
    async with Client(build_server(b.root, store=b.store_url)) as client:
        prompt = await client.read_resource(f"audit://runs/{run_id}/packets/{packet['packet_id']}/prompt")
    text = prompt.contents[0].text  # type: ignore[union-attr]
    assert "the threat model of this repository" in text and str(b.root) in text and str(a.root) not in text
    assert a.submit_packet(run_id, str(packet["packet_id"]), reviewer.results(packet)).accepted
    a.merge_and_ingest(run_id, [])
    review = b.next_step(CAPS)
    assert review.step_kind == "dispatch_review" and review.run_id != run_id
    prompt_b = Path(b.packet_prompt_path(str(review.run_id), (review.packet_ids or [""])[0])).read_text()
    model = prompt_b.split("## The audit's threat model", 1)[1]
    assert "Another reviewer wrote this" in model and "**Entry points**" in model
