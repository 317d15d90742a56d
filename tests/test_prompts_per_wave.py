"""A run's packet prompts are written wave by wave: dispatch writes the first two waves' and the block every
prompt of the run shares once; the calls a host makes between launches (plan_status, next_step, a wave's
launch list) write the next ones, each a whole document; a host restarted mid-run gets the missing ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from tests.conftest import ScriptedReviewer
from tests.driving import call_ok

CONFIG = (
    'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\n'
    "context_pass = false\nverification_pass = false\n"
    "[model]\nrequests_per_minute = 4000\ninput_tokens_per_minute = 2000000\noutput_tokens_per_minute = 400000\n"
)
ASSIGNMENT = "# Your assignment: packet "


async def _resource(client: Client, uri: str) -> str:
    result = await client.read_resource(uri)
    return result.contents[0].text  # type: ignore[union-attr]


def _written(plan: dict[str, Any]) -> list[bool]:
    return [Path(p["prompt_path"]).is_file() for p in plan["packets"]]


def _shared_block(prompt: str) -> str:
    return prompt[: prompt.index(ASSIGNMENT)]


@pytest.mark.anyio
async def test_prompts_are_written_for_the_waves_the_host_launches_next(repo: Path, reviewer: ScriptedReviewer) -> None:
    (repo / ".audit-mcp.toml").write_text(CONFIG)
    async with Client(build_server(repo)) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 2})
        assert step["step_kind"] == "dispatch_review" and step["wave_size"] == 2
        run_id = step["run_id"]
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        packets = plan["packets"]
        assert len(packets) >= 7, "the run needs more than two waves of two"
        # Two waves of two: the first four prompts, in launch order, and no other.
        assert _written(plan) == [True] * 4 + [False] * (len(packets) - 4)
        instructions = Path(step["prompt_path"]).read_text()
        assert "those of the first two waves (rolling: twice the width) exist now" in instructions

        first = Path(packets[0]["prompt_path"]).read_text()
        block = _shared_block(first)
        assert "## The audit's threat model" in block and len(block) > len(first) / 3
        # A packet whose prompt is not written yet is still one whole document through its resource.
        late = packets[-1]
        text = await _resource(client, f"audit://runs/{run_id}/packets/{late['packet_id']}/prompt")
        assert text.startswith(block) and f"{ASSIGNMENT}{late['packet_id']}" in text
        assert all(t["task_id"] in text for t in late["tasks"]) and "submit_packet" in text

        # The host launched the first wave and one packet finished: the next two waves' prompts are written.
        launched = [p["packet_id"] for p in packets[:2]]
        receipt = await call_ok(
            client,
            "submit_packet",
            {"run_id": run_id, "packet_id": launched[0], "results": reviewer.results(packets[0])},
        )
        assert receipt["accepted"], receipt["errors"]
        status = await call_ok(client, "plan_status", {"run_id": run_id, "launched": launched})
        following = [w["packet_id"] for w in status["waiting"]][:4]
        assert following == [p["packet_id"] for p in packets[2:6]]
        assert _written(plan) == [True] * 6 + [False] * (len(packets) - 6)
        for packet in packets[4:6]:
            written = Path(packet["prompt_path"]).read_text()
            # The same shared block, byte for byte (prompt caches), and the packet's own assignment after it.
            assert _shared_block(written) == block
            assert written == await _resource(client, f"audit://runs/{run_id}/packets/{packet['packet_id']}/prompt")
            assert all(t["task_id"] in written for t in packet["tasks"])

        # A wave's launch list read on its own writes that wave's prompts before the host launches it.
        last_wave = len(plan["waves"])
        wave = json.loads(await _resource(client, f"audit://runs/{run_id}/dispatch-plan/waves/{last_wave}"))
        assert all(Path(p["prompt_path"]).is_file() for p in wave["packets"])
        for entry in wave["packets"]:
            Path(entry["prompt_path"]).unlink()  # as if this host never got that far

    # The host stopped after four packets were in: restarted, it gets the prompts of what it launches next.
    async with Client(build_server(repo)) as client:
        for packet in packets[1:4]:
            receipt = await call_ok(
                client,
                "submit_packet",
                {"run_id": run_id, "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
            )
            assert receipt["accepted"], receipt["errors"]
        for packet in packets[4:]:  # nothing written after the first waves survives on this host
            Path(packet["prompt_path"]).unlink(missing_ok=True)
        step = await call_ok(client, "next_step", {})
        assert step["step_kind"] == "dispatch_review" and step["run_id"] == run_id
        assert step["packet_ids"] == [p["packet_id"] for p in packets[4:]]
        assert _written(plan) == [True] * 8 + [False] * (len(packets) - 8)
        launched = [p["packet_id"] for p in packets[:4]]
        for n in range(4, len(packets)):
            await call_ok(client, "plan_status", {"run_id": run_id, "launched": launched})
            packet = packets[n]
            # Every packet the host launches has its whole prompt by then.
            prompt = Path(packet["prompt_path"]).read_text()
            assert _shared_block(prompt) == block and f"{ASSIGNMENT}{packet['packet_id']}" in prompt
            launched.append(packet["packet_id"])
            receipt = await call_ok(
                client,
                "submit_packet",
                {"run_id": run_id, "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
            )
            assert receipt["accepted"], receipt["errors"]
        merged = await call_ok(client, "merge_and_ingest", {"run_id": run_id, "failures": []})
        assert merged["tasks_covered"] == sum(len(p["tasks"]) for p in packets)
        assert (await call_ok(client, "next_step", {}))["step_kind"] == "present_report"
