"""`audit-mcp status`: a table for people, JSON for scripts, and the same view as the resource audit://status."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.cli import main
from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import first_review, opinions


def cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def half_done_audit(repo: Path, reviewer: ScriptedReviewer) -> tuple[AuditService, dict[str, Any]]:
    """One packet submitted, one failed for good (max_attempts 1), the rest still out in the open run."""
    (repo / ".audit-mcp.toml").write_text("max_attempts = 1\n")
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True, "max_active_subagents": 2})
    plan = json.loads(service.plan_path(step.run_id or "").read_text())
    assert len(plan["packets"]) >= 3
    first = plan["packets"][0]
    assert service.submit_packet(plan["run_id"], first["packet_id"], reviewer.results(first)).accepted
    return service, plan


def test_status_json_matches_the_coverage_state_mid_audit(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    service, plan = half_done_audit(repo, reviewer)
    status = cli_json(capsys, "status", "--root", str(repo), "--json")
    coverage = service.coverage()
    assert status["coverage"] == coverage["totals"] and status["coverage_by_lens"] == coverage["by_lens"]
    # Every cell is out in the run but the context cell, answered before review.
    assert status["coverage"]["assigned"] == coverage["totals"]["total"] - 1
    assert status["obligations"]["context"]["cells"]["reviewed"] == 1
    assert status["forecast"]["open_run"] == plan["run_id"]
    assert status["forecast"]["open_run_packets_outstanding"] == len(plan["packets"]) - 1
    assert status["runs"][1]["waves"] == plan["waves"] and status["runs"][1]["submitted"] == 1
    assert [r["packet_kind"] for r in status["runs"]] == ["context", "review"]

    failed = plan["packets"][1]
    service.merge_and_ingest(plan["run_id"], [{"packet_id": failed["packet_id"], "error": "the agent crashed"}])
    status = cli_json(capsys, "status", "--root", str(repo))  # piped: JSON without asking
    unsubmitted = sum(len(p["tasks"]) for p in plan["packets"][1:])
    assert status["coverage"]["failed"] == status["gaps_total"] == unsubmitted
    assert status["coverage"]["reviewed"] == len(plan["packets"][0]["tasks"]) + 1
    assert {g["task_id"] for g in status["gaps"]} <= {t["task_id"] for p in plan["packets"][1:] for t in p["tasks"]}
    # What is still pending is the second opinions on what the one packet found.
    verify = status["obligations"]["verification"]["cells"]
    assert status["forecast"]["open_run"] is None and status["forecast"]["pending_cells"] == verify["pending"]
    assert sum(status["findings_by_severity"].values()) == len(reviewer.reported)


def test_status_table_reads_as_a_report_of_progress(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    service, plan = half_done_audit(repo, reviewer)
    assert main(["status", "--root", str(repo), "--table"]) == 0
    table = capsys.readouterr().out
    assert f"completeness: {service.status().completeness}" in table
    for lens in ("security", "correctness", "maintainability"):
        assert f"\n  {lens} " in table
    assert re.search(rf"{plan['run_id']}\s+dispatch\s+review\s+open", table)
    assert "threat model: 1 cell(s) (1 reviewed); written (context packet" in table
    assert f"run {plan['run_id']}: {len(plan['packets']) - 1} packet(s) not yet submitted" in table
    assert "Gaps (0)" in table and "Findings (" in table


def test_status_before_any_audit_says_how_to_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--root", str(tmp_path), "--table"]) == 0
    assert "no audit has started for" in capsys.readouterr().out
    assert main(["status", "--root", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    view = json.loads(captured.out)
    assert view["audit_id"] is None and "next-step --root" in view["message"]
    assert "next-step --root" in captured.err
    assert not (tmp_path / ".audit-mcp").exists()  # looking changes nothing


@pytest.mark.anyio
async def test_the_status_resource_serves_the_same_view_as_the_tool(repo: Path, reviewer: ScriptedReviewer) -> None:
    half_done_audit(repo, reviewer)
    async with Client(build_server(repo)) as client:
        resource = json.loads((await client.read_resource("audit://status")).contents[0].text)  # type: ignore[union-attr]
        tool = (await client.call_tool("audit_status", {})).structured_content
    assert tool is not None
    assert resource["coverage"] == tool["coverage"] and resource["forecast"] == tool["forecast"]
    assert resource["forecast"]["open_run_packets_outstanding"] >= 2


def test_the_quota_forecast_before_dispatch_is_the_run_dispatched(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two packets per run: the forecast packs only the head of the queue the next run takes, never all of it.
    (repo / ".audit-mcp.toml").write_text("max_packets_per_run = 2\nmax_packet_tokens = 12000\n")
    root = str(repo)
    cli_json(capsys, "intake", "--root", root)
    cli_json(capsys, "plan", "--root", root)
    quota = cli_json(capsys, "quota", "--root", root)
    status = cli_json(capsys, "status", "--root", root, "--json")
    assert quota["schedule"]["pending_cells"] == quota["schedule"]["open_cells"] == status["coverage"]["total"] > 0
    # The first run is the context packet alone, and the forecast says so.
    step = cli_json(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    context = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    assert context["packet_kind"] == "context" and len(context["packets"]) == 1
    assert quota["schedule"]["packets"] == status["forecast"]["next_run_packets"] == 1
    assert quota["schedule"]["estimated_tokens"] == context["packets"][0]["estimated_tokens"]
    service = AuditService(repo)
    for packet in context["packets"]:
        assert service.submit_packet(context["run_id"], packet["packet_id"], opinions().results(packet)).accepted
    service.merge_and_ingest(context["run_id"], [])
    quota = cli_json(capsys, "quota", "--root", root)
    status = cli_json(capsys, "status", "--root", root, "--json")
    total = status["coverage"]["total"] - 1  # every cell but the context one, answered
    assert quota["schedule"]["pending_cells"] == quota["schedule"]["open_cells"] == total
    step = cli_json(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    assert len(plan["packets"]) == quota["schedule"]["packets"] == status["forecast"]["next_run_packets"] == 2
    assert sum(len(p["tasks"]) for p in plan["packets"]) < total
    assert quota["schedule"]["estimated_tokens"] == sum(p["estimated_tokens"] for p in plan["packets"])
    assert quota["forecast"]["packets"] == step["forecast"]["packets"]
    after = cli_json(capsys, "quota", "--root", root)
    handed_out = sum(len(p["tasks"]) for p in plan["packets"])
    assert after["schedule"]["open_cells"] == total and after["schedule"]["pending_cells"] == total - handed_out
    # The open run's packets as they were packed, then the next run's.
    assert set(plan["launch_order"]) <= set(after["schedule"]["launch_order"])
    assert after["schedule"]["packets"] > 2
