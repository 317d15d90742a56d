"""The dispatch plan of a run: packets in launch order, with their prompts, tasks, tiers and start times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # an annotation only: a forecast, which reads this module's tiers, loads no packer
    from audit_mcp.engine.packets import PacketPlan

TIER_ORDER = {"deep": 0, "standard": 1, "small": 2}


@dataclass(frozen=True)
class PacketSpec:
    packet_id: str
    plan: PacketPlan
    prompt_path: Path
    kind: str = "review"  # context, review or verify: what the packet's subagent is asked for


def dispatch_plan(
    *,
    run_id: str,
    kind: str,
    specs: Sequence[PacketSpec],
    waves: Sequence[int],
    cooldown_until: str | None,
    order: Sequence[str] | None = None,
    schedule: Mapping[str, Any] | None = None,
    launch_offsets: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The dispatch plan of a run; packets in launch order (the scheduler's, else deepest and largest first).

    ``launch_offsets`` paces the starts: a packet's ``not_before_seconds`` counts from the moment the run's
    first subagent started.
    """
    offsets = launch_offsets or {}
    ordered = sorted(specs, key=lambda s: (TIER_ORDER[s.plan.tier], -s.plan.estimated_tokens, s.packet_id))
    if order is not None:
        position = {packet_id: n for n, packet_id in enumerate(order)}
        ordered.sort(key=lambda s: position.get(s.packet_id, len(position)))
    waves = list(waves)
    return {
        "run_id": run_id,
        "kind": kind,
        "packet_kind": ordered[0].kind if ordered else "review",
        "wave_size": waves[0] if waves else 0,
        "waves": waves,
        "cooldown_until": cooldown_until,
        "estimated_wave_tokens": sum(s.plan.estimated_tokens for s in ordered[: waves[0] if waves else 0]),
        "estimated_total_tokens": sum(s.plan.estimated_tokens for s in ordered),
        "launch_order": [s.packet_id for s in ordered],
        "schedule": dict(schedule or {}),
        "packets": [
            {
                "packet_id": s.packet_id,
                "packet_kind": s.kind,
                "prompt_path": str(s.prompt_path),
                "prompt_uri": f"audit://runs/{run_id}/packets/{s.packet_id}/prompt",
                "estimated_tokens": s.plan.estimated_tokens,
                "not_before_seconds": round(float(offsets.get(s.packet_id, 0.0)), 1),
                "model_hint": {"tier": s.plan.tier, "why": s.plan.tier_reason},
                "tasks": [
                    {
                        "task_id": c.task_id,
                        "file": c.path,
                        "start_line": c.start_line,
                        "end_line": c.end_line,
                        "lens": c.lens,
                    }
                    | ({"subject": c.subject} if c.subject else {})
                    for c in s.plan.cells
                ],
            }
            for s in ordered
        ],
    }
