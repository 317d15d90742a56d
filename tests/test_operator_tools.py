"""The host's operator tools over MCP: validate_results, explain_task and requeue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from tests.conftest import ScriptedReviewer
from tests.driving import call_ok
from tests.test_e2e_mcp import _read, drive_audit

CAPS = {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4}


@pytest.mark.anyio
async def test_the_operator_tools_publish_schemas_annotations_and_descriptions(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name in ("validate_results", "explain_task", "requeue"):
        assert tools[name].output_schema is not None and tools[name].description, name
    assert tools["validate_results"].annotations.read_only_hint is True
    assert tools["explain_task"].annotations.read_only_hint is True
    assert tools["requeue"].annotations.read_only_hint is False
    assert tools["requeue"].annotations.destructive_hint is False


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["current", "legacy"])
async def test_a_host_checks_results_then_explains_and_requeues_work(
    repo: Path, reviewer: ScriptedReviewer, mode: str
) -> None:
    server = build_server(repo)
    client_args: dict[str, Any] = {"mode": "legacy"} if mode == "legacy" else {}
    async with Client(server, **client_args) as client:
        step = await call_ok(client, "next_step", {"root": str(repo), **CAPS})
        plan = json.loads(await _read(client, f"audit://runs/{step['run_id']}/dispatch-plan"))
        packet = plan["packets"][0]
        results = reviewer.results(packet)
        args = {"run_id": plan["run_id"], "packet_id": packet["packet_id"]}
        dry = await call_ok(client, "validate_results", {**args, "results": results})
        assert dry["accepted"] is True and dry["dry_run"] is True
        wrong = [dict(results[0], summary=""), *results[1:]]
        refused = await call_ok(client, "validate_results", {**args, "results": wrong})
        assert refused["accepted"] is False and refused["errors"][0]["location"] == "/results/0/summary"
        status = await call_ok(client, "audit_status", {})
        assert status["runs"][0]["submitted"] == 0  # a dry run records nothing
        real = await call_ok(client, "submit_packet", {**args, "results": results})
        assert {k: real[k] for k in ("accepted", "tasks_covered", "findings_kept", "warnings")} == {
            k: dry[k] for k in ("accepted", "tasks_covered", "findings_kept", "warnings")
        }
        task = packet["tasks"][0]
        told = await call_ok(client, "explain_task", {"task_id": task["task_id"]})
        assert told["state"] == "assigned" and told["packets"][0]["submitted_via"] == "call"
        assert f"handed out in packet {packet['packet_id']}" in told["why"]
        held = await call_ok(client, "requeue", {"reason": "look again", "tasks": [task["task_id"]]})
        assert task["task_id"] in held["not_requeued"] and held["requeued"] == []
        unknown = await client.call_tool("explain_task", {"task_id": "T99999"})
        assert unknown.is_error and "is not in audit" in unknown.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_requeue_over_mcp_reopens_a_finished_audit_for_one_lens(repo: Path, reviewer: ScriptedReviewer) -> None:
    async with Client(build_server(repo)) as client:
        await drive_audit(client, reviewer, repo)
        done = await call_ok(
            client,
            "requeue",
            {"reason": "a new threat model names the cache", "files": ["app/cache.py"], "lenses": ["concurrency"]},
        )
        assert len(done["requeued"]) == 1 and not done["not_requeued"]
        step = await call_ok(client, "next_step", {})
        assert step["step_kind"] == "dispatch_review"
        plan = json.loads(await _read(client, f"audit://runs/{step['run_id']}/dispatch-plan"))
        assert [(t["file"], t["lens"]) for p in plan["packets"] for t in p["tasks"]] == [
            ("app/cache.py", "concurrency")
        ]
        prompt = await _read(client, plan["packets"][0]["prompt_uri"])
        assert "a new threat model names the cache" in prompt
        refused = await client.call_tool("requeue", {"reason": " "})
        assert refused.is_error and "needs a reason" in refused.content[0].text  # type: ignore[union-attr]
