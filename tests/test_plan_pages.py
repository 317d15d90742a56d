"""A run of 200 packets: its dispatch plan resource comes in pages and waves a host can read, each under
~20k tokens; the plan file keeps its whole shape, with one launch file per wave beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from audit_mcp.surfaces.server import build_server
from tests.driving import call_ok, first_review_over_mcp

# What a host takes from one read, with a pessimistic 3 characters per token for JSON.
MAX_READ_CHARS = 20_000 * 3

_MODULE = '''"""Area {n}."""

import json


def handle_{n}(request, store):
    body = json.loads(request.body)
    user = store.get(body["user_id"])
    if user is None:
        return {{"status": 404}}
    return {{"status": 200, "user": user["name"], "n": {n}}}
'''


def _many_packets(root: Path) -> Path:
    """A repository whose first run holds ``max_packets_per_run`` (200) packets."""
    for n in range(2400):
        folder = root / f"pkg{n // 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{n:04d}.py").write_text(_MODULE.format(n=n))
    return root


async def _read(client: Client, uri: str) -> str:
    result = await client.read_resource(uri)
    return result.contents[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_200_packet_plan_is_read_in_pages_and_waves_under_20k_tokens(tmp_path: Path) -> None:
    root = _many_packets(tmp_path / "many")
    async with Client(build_server(root)) as client:
        step = await first_review_over_mcp(
            client, {"host_can_dispatch_subagents": True, "host_max_active_subagents": 8}
        )
        plan_file = Path(step["artifact_paths"]["plan"])
        plan = json.loads(plan_file.read_text())
        assert len(plan["packets"]) == 200 and len(plan_file.read_text()) > 5 * MAX_READ_CHARS
        # The file keeps its documented shape: every packet with its tasks, the launch order.
        assert plan["launch_order"] == [p["packet_id"] for p in plan["packets"]]
        assert all(p["tasks"] for p in plan["packets"])

        uri: str | None = f"audit://runs/{plan['run_id']}/dispatch-plan"
        paged: list[dict[str, Any]] = []
        pages = 0
        while uri is not None:
            text = await _read(client, uri)
            assert len(text) < MAX_READ_CHARS, (uri, len(text))
            page = json.loads(text)
            assert page["run_id"] == plan["run_id"] and page["waves"] == plan["waves"]
            paged += page["packets"]
            uri = page["page"]["next_uri"]
            pages += 1
        assert pages > 1 and paged == plan["packets"]

        launched: list[str] = []
        for wave, size in enumerate(plan["waves"], 1):
            text = await _read(client, f"audit://runs/{plan['run_id']}/dispatch-plan/waves/{wave}")
            assert len(text) < MAX_READ_CHARS
            doc = json.loads(text)
            assert len(doc["packets"]) == size
            launched += [p["packet_id"] for p in doc["packets"]]
            on_disk = json.loads((plan_file.parent / "waves" / f"wave-{wave:02d}.json").read_text())
            assert on_disk == doc
        assert launched == plan["launch_order"]

        prompt = await _read(client, "audit://step/current/prompt")
        assert len(prompt) < MAX_READ_CHARS
        assert f"audit://runs/{plan['run_id']}/dispatch-plan/waves/1" in prompt and "next_uri" in prompt
        with pytest.raises(MCPError, match="cursor"):
            await _read(client, f"audit://runs/{plan['run_id']}/dispatch-plan?cursor=9999")
        with pytest.raises(MCPError, match="wave"):
            await _read(client, f"audit://runs/{plan['run_id']}/dispatch-plan/waves/999")


@pytest.mark.anyio
async def test_a_small_plan_comes_whole_from_one_read(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True})
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        page = json.loads(await _read(client, f"audit://runs/{plan['run_id']}/dispatch-plan"))
        assert {k: v for k, v in page.items() if k not in ("page", "wave_pages")} == plan
        assert page["page"]["next_cursor"] is None
