"""What a host reads in a 20,000-file audit: the size of every tool result and every resource page.

    python benchmarks/sizes.py [--files 20000] [--keep DIR]

Generates the repository of ``scale.py`` (Python and JavaScript modules, 100 per directory), then drives
the first run over MCP (an in-memory ``Client`` on the real server): ``next_step`` (capability check, then
dispatch), every page of ``audit://runs/{id}/dispatch-plan``, every wave page, the step prompt, every
packet prompt, ``submit_packet`` for every packet (plus one refused submission), ``merge_and_ingest``,
the next ``next_step``, ``audit_status``, ``quota_status``, and the status, coverage and report
resources. Prints one JSON document: each kind's largest size in characters, and in tokens at 4 and at a
pessimistic 3 characters per token (JSON full of short keys tokenizes worse than prose).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from mcp import Client  # noqa: E402

from audit_mcp.surfaces.server import build_server  # noqa: E402
from benchmarks.scale import _machine, generate  # noqa: E402

LIMIT_TOKENS = 20_000


class Sizes:
    def __init__(self) -> None:
        self.largest: dict[str, tuple[int, str]] = {}

    def add(self, kind: str, text: str, what: str) -> None:
        if len(text) > self.largest.get(kind, (0, ""))[0]:
            self.largest[kind] = (len(text), what)

    def report(self) -> dict[str, Any]:
        return {
            kind: {"chars": n, "tokens_at_4": n // 4, "tokens_at_3": n // 3, "largest": what}
            for kind, (n, what) in sorted(self.largest.items())
        }


async def _tool(client: Client, sizes: Sizes, kind: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    text = "".join(getattr(c, "text", "") for c in result.content)
    sizes.add(f"tool:{kind}", text, name)
    assert result.structured_content is not None, text[:500]
    return result.structured_content


async def _resource(client: Client, sizes: Sizes, kind: str, uri: str) -> str:
    result = await client.read_resource(uri)
    text: str = result.contents[0].text  # type: ignore[union-attr]
    sizes.add(f"resource:{kind}", text, uri)
    return text


def _answer(packet: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "task_id": t["task_id"],
            "status": "reviewed",
            "findings": [],
            "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}: the request "
            "body is parsed, looked up and summed; no injection, no unchecked input.",
        }
        for t in packet["tasks"]
    ]


async def drive(root: Path) -> dict[str, Any]:
    sizes = Sizes()
    async with Client(build_server(root)) as client:
        check = await _tool(client, sizes, "next_step", "next_step", {})
        assert check["step_kind"] == "capability_check", check["step_kind"]
        await _resource(client, sizes, "step_prompt", "audit://step/current/prompt")
        await _tool(client, sizes, "audit_status", "audit_status", {})
        await _tool(client, sizes, "quota_status", "quota_status", {})
        step = await _tool(
            client,
            sizes,
            "next_step",
            "next_step",
            {"host_can_dispatch_subagents": True, "host_max_active_subagents": 16},
        )
        run_id = step["run_id"]
        await _resource(client, sizes, "step", "audit://step/current")
        await _resource(client, sizes, "step_prompt", "audit://step/current/prompt")
        plan_file = Path(step["artifact_paths"]["plan"])
        plan = json.loads(plan_file.read_text())
        uri: str | None = f"audit://runs/{run_id}/dispatch-plan"
        pages = 0
        while uri is not None:
            page = json.loads(await _resource(client, sizes, "dispatch_plan_page", uri))
            uri = page["page"]["next_uri"]
            pages += 1
        for wave in range(1, len(plan["waves"]) + 1):
            await _resource(client, sizes, "dispatch_plan_wave", f"audit://runs/{run_id}/dispatch-plan/waves/{wave}")
        for packet in plan["packets"]:
            await _resource(client, sizes, "packet_prompt", packet["prompt_uri"])
        first = plan["packets"][0]
        bad = [{**r, "summary": "ok"} for r in _answer(first)]  # every summary refused: the largest receipt
        await _tool(
            client,
            sizes,
            "submit_packet",
            "submit_packet",
            {"run_id": run_id, "packet_id": first["packet_id"], "results": bad},
        )
        for packet in plan["packets"]:
            receipt = await _tool(
                client,
                sizes,
                "submit_packet",
                "submit_packet",
                {"run_id": run_id, "packet_id": packet["packet_id"], "results": _answer(packet)},
            )
            assert receipt["accepted"], receipt["errors"][:3]
        await _tool(client, sizes, "merge_and_ingest", "merge_and_ingest", {"run_id": run_id, "failures": []})
        await _tool(client, sizes, "next_step", "next_step", {})
        await _tool(client, sizes, "audit_status", "audit_status", {})
        await _tool(client, sizes, "quota_status", "quota_status", {})
        for kind, resource in (
            ("status", "audit://status"),
            ("coverage", "audit://coverage"),
            ("report_md", "audit://report"),
            ("report_json", "audit://report/json"),
            ("report_sarif", "audit://report/sarif"),
        ):
            await _resource(client, sizes, kind, resource)
    out = sizes.report()
    tools = [v for k, v in out.items() if k.startswith("tool:")]
    pages_ = [v for k, v in out.items() if k.startswith("resource:")]
    return {
        "plan_packets": len(plan["packets"]),
        "plan_waves": len(plan["waves"]),
        "plan_file_chars": len(plan_file.read_text()),
        "plan_pages": pages,
        "largest_tool_result_tokens_at_3": max(v["tokens_at_3"] for v in tools),
        "largest_resource_page_tokens_at_3": max(v["tokens_at_3"] for v in pages_),
        "under_20k_tokens": all(v["tokens_at_3"] < LIMIT_TOKENS for v in (*tools, *pages_)),
        "sizes": out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--keep", type=Path, help="generate the repository here and keep it")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="audit-mcp-sizes-"))
    root = base / "repo"
    try:
        if not root.exists():
            root.mkdir(parents=True)
            generate(root, args.files)
        shutil.rmtree(root / ".audit-mcp", ignore_errors=True)
        result = asyncio.run(drive(root))
        print(json.dumps({"machine": _machine(), "files": args.files, **result}, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
