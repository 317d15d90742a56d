"""The server declares what it sends: logging with setLevel on the handshake protocol, and resource updates
for the step and status resources to subscribers on both protocols."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ResourceUpdated

from audit_mcp.surfaces.server import build_server
from tests.conftest import ScriptedReviewer
from tests.driving import first_review_over_mcp, run_id

STEP, STATUS = "audit://step/current", "audit://status"


@contextmanager
def handshake_era() -> Iterator[None]:
    """setLevel and resources/subscribe are right on 2025-11-25; the SDK marks them deprecated for 2026."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


@pytest.mark.anyio
async def test_on_2025_11_25_logging_is_declared_and_set_level_is_obeyed(repo: Path) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with Client(build_server(repo), mode="legacy", logging_callback=on_log) as client:  # type: ignore[arg-type]
        assert client.protocol_version == "2025-11-25"
        assert client.server_capabilities.logging is not None
        await client.call_tool("next_step", {"host_can_dispatch_subagents": True})
        assert logs and all(log.level == "info" and log.logger == "audit-mcp" for log in logs)
        with handshake_era():
            assert await client.set_logging_level("warning") == types.EmptyResult()
        logs.clear()
        await client.call_tool("next_step", {"new_audit": True})
        assert logs == []  # nothing below warning after the client asked for warning
        with handshake_era():
            await client.set_logging_level("debug")
        await client.call_tool("next_step", {})
        assert logs


@pytest.mark.anyio
async def test_on_2025_11_25_subscribers_hear_when_the_step_and_status_change(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    async with Client(build_server(repo), mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.resources is not None and client.server_capabilities.resources.subscribe
        with handshake_era():
            await client.subscribe_resource(STEP)
            await client.subscribe_resource(STATUS)
        result = await client.call_tool("next_step", {"host_can_dispatch_subagents": True})
        await anyio.wait_all_tasks_blocked()
        assert STEP in updated and STATUS in updated
        plan = json.loads(Path(result.structured_content["artifact_paths"]["plan"]).read_text())  # type: ignore[index]
        packet = plan["packets"][0]
        updated.clear()
        await client.call_tool(
            "submit_packet",
            {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
        )
        await anyio.wait_all_tasks_blocked()
        assert updated == [STATUS]
        with handshake_era():
            await client.unsubscribe_resource(STATUS)
        updated.clear()
        await client.call_tool("merge_and_ingest", {"run_id": plan["run_id"]})
        await anyio.wait_all_tasks_blocked()
        assert STATUS not in updated


@pytest.mark.anyio
async def test_on_2026_07_28_listeners_get_resource_updates_for_the_step_and_status(repo: Path) -> None:
    async with Client(build_server(repo), mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        resources = client.server_capabilities.resources
        assert resources is not None and resources.subscribe
        async with client.listen(resource_subscriptions=[STEP, STATUS]) as listener:
            assert set(listener.honored.resource_subscriptions) == {STEP, STATUS}
            await client.call_tool("next_step", {"host_can_dispatch_subagents": True})
            seen: set[str] = set()
            with anyio.fail_after(5):
                async for event in listener:
                    if isinstance(event, ResourceUpdated):
                        seen.add(event.uri)
                    if seen >= {STEP, STATUS}:
                        break
        assert seen >= {STEP, STATUS}


@pytest.mark.anyio
async def test_every_tool_and_prompt_argument_is_described(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        tools = (await client.list_tools()).tools
        prompts = (await client.list_prompts()).prompts
    for tool in tools:
        for name, spec in tool.input_schema["properties"].items():
            assert spec.get("description", "").strip(), f"{tool.name}.{name} has no description"
    for prompt in prompts:
        for arg in prompt.arguments or []:
            assert (arg.description or "").strip(), f"prompt {prompt.name}.{arg.name} has no description"
    next_step = next(t for t in tools if t.name == "next_step")
    spec = next_step.input_schema["properties"]["host_max_active_subagents"]
    assert {k: spec[k] for k in ("type", "minimum", "maximum")} == {"type": "integer", "minimum": 1, "maximum": 64}
    assert "host_max_active_subagents" not in next_step.input_schema.get("required", [])  # optional: leave it out


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["protocol-2025-11-25", "protocol-2026-07-28"])
async def test_run_packet_task_ids_and_roots_complete(repo: Path, mode: str) -> None:
    plan_ref = types.ResourceTemplateReference(uri="audit://runs/{run_id}/dispatch-plan")
    prompt_ref = types.ResourceTemplateReference(uri="audit://runs/{run_id}/packets/{packet_id}/prompt")
    async with Client(build_server(repo), mode=mode) as client:  # type: ignore[arg-type]
        assert client.server_capabilities.completions is not None
        before = await client.complete(plan_ref, {"name": "run_id", "value": ""})
        assert before.completion.values == []  # no audit yet: nothing to offer, and no error
        step = await first_review_over_mcp(client)
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        runs = await client.complete(plan_ref, {"name": "run_id", "value": "A"})
        assert runs.completion.values == [
            plan["run_id"],
            run_id(repo, 1, 1),
        ]  # newest first: this review run, the context run
        packets = await client.complete(
            prompt_ref, {"name": "packet_id", "value": ""}, context_arguments={"run_id": plan["run_id"]}
        )
        assert packets.completion.values == sorted(p["packet_id"] for p in plan["packets"])
        narrowed = await client.complete(prompt_ref, {"name": "packet_id", "value": plan["packets"][-1]["packet_id"]})
        assert narrowed.completion.values == [plan["packets"][-1]["packet_id"]]
        tasks = await client.complete(prompt_ref, {"name": "task_id", "value": "T"})
        all_tasks = sorted(t["task_id"] for p in plan["packets"] for t in p["tasks"])
        assert tasks.completion.values == all_tasks[:100] and tasks.completion.has_more == (len(all_tasks) > 100)
        roots = await client.complete(types.PromptReference(name="start_audit"), {"name": "root", "value": "/"})
        assert roots.completion.values == [str(repo.resolve())]
        other = await client.complete(types.PromptReference(name="start_audit"), {"name": "depth", "value": ""})
        assert other.completion.values == []
