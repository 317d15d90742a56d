"""The dispatch plan in pieces a host can read: pages of packets, and one launch list per wave.

A run of 200 packets has a plan of about a megabyte, far more than a host takes from one read. The plan
file keeps its whole shape for scripts; hosts read it as pages of at most ``PAGE_CHARS`` characters (a
summary, then packets in launch order, ``next_cursor`` to go on), or wave by wave: a wave's launch list
names each packet's prompt, tier, size and start offset, which is all a host needs to launch it (the
tasks are in the packet's prompt).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from audit_mcp.core.errors import ConfigError

# About 16k tokens at a pessimistic 3 characters per token for JSON: under the ~20k hosts take in one read.
PAGE_CHARS = 48_000
# Plan fields that grow with the packet count and repeat what the pages say packet by packet.
_BULKY = ("launch_order",)
_BULKY_SCHEDULE = ("launch_offsets",)


def plan_uri(run_id: str) -> str:
    return f"audit://runs/{run_id}/dispatch-plan"


def wave_uri(run_id: str, wave: int) -> str:
    return f"{plan_uri(run_id)}/waves/{wave}"


def wave_slices(waves: Sequence[int]) -> list[tuple[int, int]]:
    """Each wave's [start, end) in the plan's launch order."""
    out, start = [], 0
    for size in waves:
        out.append((start, start + size))
        start += size
    return out


def launch_entry(packet: Mapping[str, Any]) -> dict[str, Any]:
    """What a host needs to launch one packet's subagent."""
    files = list(dict.fromkeys(t["file"] for t in packet["tasks"]))
    return {
        "packet_id": packet["packet_id"],
        "prompt_path": packet["prompt_path"],
        "prompt_uri": packet["prompt_uri"],
        "model_hint": packet["model_hint"],
        "estimated_tokens": packet["estimated_tokens"],
        "not_before_seconds": packet.get("not_before_seconds", 0.0),
        "task_count": len(packet["tasks"]),
        "files": files,
    }


def wave_doc(plan: Mapping[str, Any], wave: int) -> dict[str, Any]:
    """Wave ``wave`` (1-based) of a plan: its packets' launch entries, and where the next wave is."""
    slices = wave_slices(plan["waves"])
    if not 1 <= wave <= len(slices):
        raise ConfigError(
            f"run {plan['run_id']} has {len(slices)} wave(s); ask for a wave from 1 to {len(slices)}"
            if slices
            else f"run {plan['run_id']} has no waves"
        )
    start, end = slices[wave - 1]
    return {
        "run_id": plan["run_id"],
        "wave": wave,
        "waves": len(slices),
        "cooldown_until": plan.get("cooldown_until"),
        "packets": [launch_entry(p) for p in plan["packets"][start:end]],
        "next_wave_uri": wave_uri(plan["run_id"], wave + 1) if wave < len(slices) else None,
        "tasks": "each packet's tasks are in its prompt, and in the whole plan file",
    }


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def _cursor(text: str | None, total: int) -> int:
    if text is None or text == "":
        return 0
    if not text.isdigit() or int(text) >= max(total, 1):
        raise ConfigError(f"cursor {text!r} is not one this plan gave out; start again without a cursor")
    return int(text)


def plan_page(plan: Mapping[str, Any], cursor: str | None = None, limit: int | None = None) -> dict[str, Any]:
    """A page of the plan: its summary and the packets from ``cursor`` on, at most ``limit`` of them and
    ``PAGE_CHARS`` characters in all (at least one packet). A plan that fits one page comes whole."""
    packets: list[dict[str, Any]] = list(plan["packets"])
    run_id = plan["run_id"]
    if limit is not None and limit < 1:
        raise ConfigError("limit must be at least 1")
    start = _cursor(cursor, len(packets))
    whole = start == 0 and limit is None and _size(plan) <= PAGE_CHARS
    summary = {k: v for k, v in plan.items() if k != "packets" and (whole or k not in _BULKY)}
    if not whole:
        schedule = dict(summary.get("schedule") or {})
        summary["schedule"] = {k: v for k, v in schedule.items() if k not in _BULKY_SCHEDULE}
    summary["wave_pages"] = [
        {"wave": n, "packets": size, "uri": wave_uri(run_id, n)} for n, size in enumerate(plan["waves"], 1)
    ]
    used = _size(summary) + 400  # the page block below
    page: list[dict[str, Any]] = []
    for packet in packets[start:]:
        if page and ((limit is not None and len(page) >= limit) or used + _size(packet) > PAGE_CHARS):
            break
        page.append(packet)
        used += _size(packet) + 1
    end = start + len(page)
    more = end < len(packets)
    return {
        **summary,
        "packets": page,
        "page": {
            "cursor": str(start) if start else None,
            "first_packet": start + 1 if page else 0,
            "last_packet": end,
            "packets_total": len(packets),
            "next_cursor": str(end) if more else None,
            "next_uri": f"{plan_uri(run_id)}?cursor={end}" if more else None,
            "omitted": [] if whole else [*_BULKY, *(f"schedule.{k}" for k in _BULKY_SCHEDULE)],
        },
    }
