"""A whole audit driven through the MCP protocol by a scripted host, in memory and over stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from audit_mcp.surfaces.server import build_server
from tests.conftest import ScriptedReviewer
from tests.driving import call_ok, first_review_over_mcp


async def _read(client: Client, uri: str) -> str:
    result = await client.read_resource(uri)
    return result.contents[0].text  # type: ignore[union-attr]


async def drive_audit(client: Client, reviewer: ScriptedReviewer, root: Path) -> dict[str, Any]:
    """What a well-behaved host does: follow every step until the report."""
    step = await call_ok(client, "next_step", {"root": str(root)})
    assert step["step_kind"] == "capability_check"
    assert "host_can_dispatch_subagents" in await _read(client, "audit://step/current/prompt")
    step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 3})
    seen_kinds = {step["step_kind"]}
    seen_packet_kinds: list[str] = []
    for _ in range(10):
        if step["step_kind"] != "dispatch_review":
            break
        plan = json.loads(await _read(client, f"audit://runs/{step['run_id']}/dispatch-plan"))
        assert plan["wave_size"] <= 3
        seen_packet_kinds.append(plan["packet_kind"])
        for packet in plan["packets"]:
            prompt = await _read(client, packet["prompt_uri"])
            assert packet["packet_id"] in prompt and "untrusted data" in prompt
            receipt = await call_ok(
                client,
                "submit_packet",
                {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
            )
            assert receipt["accepted"], receipt["errors"]
        summary = await call_ok(client, "merge_and_ingest", {"run_id": plan["run_id"], "failures": []})
        assert summary["packets_merged"] == len(plan["packets"])
        step = await call_ok(client, "next_step", {})
        seen_kinds.add(step["step_kind"])
    assert step["step_kind"] == "present_report", step
    assert step["status"] == "complete"
    assert seen_packet_kinds == ["context", "review", "verify"]
    return step


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["protocol-2025-11-25", "protocol-2026-07-28"])
async def test_a_scripted_host_audits_the_fixture_to_a_complete_report(
    repo: Path, reviewer: ScriptedReviewer, answer_key: dict[str, Any], mode: str, store_url: str
) -> None:
    async with Client(build_server(repo), mode=mode) as client:
        await drive_audit(client, reviewer, repo)
        coverage = json.loads(await _read(client, "audit://coverage"))
        report = await _read(client, "audit://report")
        step = json.loads(await _read(client, "audit://step/current"))
    assert coverage["completeness"] == "complete"
    assert coverage["totals"]["reviewed"] == coverage["totals"]["total"] > 0
    assert step["step_kind"] == "present_report"
    assert reviewer.reported == {issue["id"] for issue in answer_key["issues"]}
    for issue in answer_key["issues"]:
        assert f"`{issue['file']}:{issue['start_line']}" in report, issue["id"]
    assert report.index("## Work blocks") < report.index("## Findings") < report.index("## Coverage")
    assert (repo / ".audit-mcp" / "report" / "report.json").is_file()


@pytest.mark.anyio
async def test_the_same_audit_runs_over_stdio_with_the_installed_command(
    repo: Path, reviewer: ScriptedReviewer, store_url: str
) -> None:
    command = Path(sys.executable).with_name("audit-mcp")
    params = StdioServerParameters(
        command=str(command),
        args=["serve", "--root", str(repo), "--store", store_url],
        env={"AUDIT_MCP_STATE_DIR": os.environ["AUDIT_MCP_STATE_DIR"]},
    )
    async with Client(params) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"next_step", "submit_packet", "merge_and_ingest", "quota_status"} <= tools
        await drive_audit(client, reviewer, repo)
    assert "## Work blocks" in (repo / ".audit-mcp" / "report" / "report.md").read_text()


@pytest.mark.anyio
async def test_a_host_without_subagents_reviews_one_packet_at_a_time(repo: Path, reviewer: ScriptedReviewer) -> None:
    async with Client(build_server(repo)) as client:
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": False})
        packets_done = 0
        while step["step_kind"] == "single_task_fallback":
            plan = json.loads(await _read(client, f"audit://runs/{step['run_id']}/dispatch-plan"))
            assert len(plan["packets"]) == 1
            packet = plan["packets"][0]
            receipt = await call_ok(
                client,
                "submit_packet",
                {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
            )
            assert receipt["accepted"]
            packets_done += 1
            step = await call_ok(client, "next_step", {})
        assert step["step_kind"] == "present_report"
        assert packets_done >= 2


@pytest.mark.anyio
async def test_tools_publish_output_schemas_and_annotations(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        prompt = await client.get_prompt("start_audit", {"root": str(repo)})
    for name in ("next_step", "submit_packet", "merge_and_ingest", "quota_status", "audit_status"):
        assert tools[name].output_schema is not None, name
        assert tools[name].description, name
    assert tools["quota_status"].annotations.read_only_hint is True
    assert tools["submit_packet"].annotations.read_only_hint is False
    text = prompt.messages[0].content.text  # type: ignore[union-attr]
    assert "next_step" in text and str(repo) in text


@pytest.mark.anyio
async def test_subagents_submitting_at_once_through_one_server_lose_nothing(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    import anyio

    (repo / ".audit-mcp.toml").write_text("max_packet_tokens = 24000\n")
    async with Client(build_server(repo)) as client:
        step = await first_review_over_mcp(
            client, {"host_can_dispatch_subagents": True, "host_max_active_subagents": 16}
        )
        plan = json.loads(await _read(client, f"audit://runs/{step['run_id']}/dispatch-plan"))
        assert len(plan["packets"]) >= 6
        receipts: list[dict[str, Any]] = []

        async def submit(packet: dict[str, Any]) -> None:
            receipts.append(
                await call_ok(
                    client,
                    "submit_packet",
                    {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
                )
            )

        async with anyio.create_task_group() as group:
            for packet in plan["packets"]:
                group.start_soon(submit, packet)
        summary = await call_ok(client, "merge_and_ingest", {"run_id": plan["run_id"]})
    assert all(r["accepted"] for r in receipts) and len(receipts) == len(plan["packets"])
    assert summary["packets_merged"] == len(plan["packets"])
    # Everything is reviewed but the verifications this merge added for the critical and high findings.
    assert summary["coverage"]["reviewed"] == summary["coverage"]["total"] - summary["verifications_planned"] > 0
    assert summary["coverage"]["pending"] == summary["verifications_planned"] == 4
