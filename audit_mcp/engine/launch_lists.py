"""The dispatch step's launch tables: a run's outstanding packets wave by wave (a host that waits for whole
waves) or as one queue (a host that refills a slot as it frees), listed in the step up to a size, and where
the host reads the rest: the plan's pages and its launch lists, one per wave as dispatch cut them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The step prompt lists the first waves' packets inline up to about this many characters (~8k tokens);
# the rest are read wave by wave from the plan's pages.
INLINE_WAVES_CHARS = 24_000


@dataclass(frozen=True)
class Launch:
    """What the tables show: a run, where its files are, its plan, and its packets still to launch (in the
    order to launch them)."""

    run_id: str
    artifacts_dir: Path
    plan_path: Path | None
    plan: Mapping[str, Any]
    outstanding: Sequence[Mapping[str, Any]]


def packet_line(p: Mapping[str, Any], offsets: Mapping[str, float]) -> str:
    start = f"**start at +{offsets[p['packet_id']]:g}s**, " if p["packet_id"] in offsets else ""
    kind = f" ({p['packet_kind']})" if p.get("packet_kind", "review") != "review" else ""
    return (
        f"- `{p['packet_id']}`{kind}: {start}model tier **{p['model_hint']['tier']}**, "
        f"~{p['estimated_tokens']:,} tokens, {len(p['tasks'])} task(s). Prompt file: `{p['prompt_path']}`"
    )


def waves_table(launch: Launch, waves: list[int], offsets: Mapping[str, float]) -> str:
    """The outstanding packets wave by wave; past ``INLINE_WAVES_CHARS``, where to read the other waves."""
    lines: list[str] = []
    used = position = 0
    for number, size in enumerate(waves, 1):
        chunk = launch.outstanding[position : position + size]
        position += size
        paced = any(p["packet_id"] in offsets for p in chunk)
        block = [f"**Wave {number}** ({len(chunk)} subagent(s){', paced' if paced else ' at once'}):"]
        block += [packet_line(p, offsets) for p in chunk]
        size_of = sum(len(line) + 1 for line in block)
        if number > 1 and used + size_of > INLINE_WAVES_CHARS:
            lines.append(_rest_of_waves(launch, waves, number, position - size))
            break
        lines += [*block, ""]
        used += size_of
    return "\n".join(lines).rstrip()


def _rest_of_waves(launch: Launch, waves: list[int], number: int, start: int) -> str:
    """Where a whole-wave host reads waves ``number`` on (their packets from ``start`` in the outstanding
    order). The launch lists are the plan's waves, numbered as dispatch cut them; the outstanding waves of a
    run resumed or re-paced since then are cut differently, so the host is told where to go on from and how
    many to launch at a time rather than a wave number that names other packets."""
    rest = len(waves) - number + 1
    remaining = len(launch.outstanding) - start
    head = f"**Waves {number} to {len(waves)}** ({rest} more wave(s), {remaining} packet(s)) are not listed here"
    folder = launch.artifacts_dir / "runs" / launch.run_id / "waves"
    plan_waves: list[int] = list(launch.plan.get("waves") or [])
    first = launch.outstanding[start]["packet_id"]
    planned, bounds, wave_of = _plan_waves(launch)
    from_wave = wave_of.get(first)
    if from_wave is None:  # a packet the plan does not list (it cannot happen): the plan's pages list them all
        return f"{head}. {plan_reading(launch)}"
    outstanding = [p["packet_id"] for p in launch.outstanding[start:]]
    if outstanding == planned[bounds[from_wave - 1] :] and waves[number - 1 :] == plan_waves[from_wave - 1 :]:
        return (
            f"{head}, to keep this prompt short. Before each of them, read its launch list: the resource "
            f"`{wave_uri(launch.run_id, from_wave)}` (and so on up to wave {len(plan_waves)}), or the file "
            f"`{folder / f'wave-{from_wave:02d}.json'}` (one file per wave, numbered alike). Each lists the wave's "
            "packets in launch order, with the same prompt file, tier and start offset as above; its "
            "`next_wave_uri` names the wave after it."
        )
    width = waves[number - 1]
    return (
        f"{head}, to keep this prompt short. Go on in launch order from packet `{first}`, {width} at a time "
        "(each wave once the one before it has finished, as above). The launch lists from "
        f"`{wave_uri(launch.run_id, from_wave)}` on (the files from `{folder / f'wave-{from_wave:02d}.json'}`) hold "
        "every packet in that order, with its prompt file, tier and start offset, grouped in the waves dispatch "
        "first planned: launch only the packets not yet submitted, and call `plan_status` between waves as step "
        "5 says; its `waiting` list is the order to follow now."
    )


def _plan_waves(launch: Launch) -> tuple[list[str], list[int], dict[str, int]]:
    """The plan's packets in launch order, where each of its waves starts in that order, and the wave (from 1)
    holding each packet."""
    planned = [p["packet_id"] for p in launch.plan.get("packets", [])]
    bounds: list[int] = []
    wave_of: dict[str, int] = {}
    at = 0
    for n, size in enumerate(launch.plan.get("waves") or [], 1):
        bounds.append(at)
        wave_of.update({pid: n for pid in planned[at : at + size]})
        at += size
    return planned, bounds, wave_of


def wave_uri(run_id: str, wave: int) -> str:
    return f"audit://runs/{run_id}/dispatch-plan/waves/{wave}"


def plan_reading(launch: Launch) -> str:
    """How to read the whole plan without one oversize read."""
    return (
        f"The whole plan (packets, tasks, token estimates) is the file `{launch.plan_path}` (for scripts: it can "
        f"be large). Hosts read it as the resource `audit://runs/{launch.run_id}/dispatch-plan`, in pages that "
        "each stay under ~20k tokens: every page has the summary and a slice of the packets in launch order, "
        "and its `page.next_uri` (a `?cursor=N` form of the same URI) is the next page, null on the last. "
        f"Or read it wave by wave: `{wave_uri(launch.run_id, 1)}` and up, one launch list per wave."
    )


def queue_table(launch: Launch, width: int, offsets: Mapping[str, float]) -> str:
    """A rolling host's packets: one queue in launch order, ``width`` of them running at any time; past
    ``INLINE_WAVES_CHARS``, where to read the rest of the queue."""
    head = (
        f"**Launch order** (keep {width} running: the first {min(width, len(launch.outstanding))} now"
        f"{' or at their start times' if offsets else ''}, then the next as each one finishes):"
    )
    lines, used = [head], len(head)
    for n, p in enumerate(launch.outstanding):
        line = packet_line(p, offsets)
        if n >= width and used + len(line) + 1 > INLINE_WAVES_CHARS:
            wave = _plan_waves(launch)[2].get(p["packet_id"], 1)
            lines.append(
                f"- ...then {len(launch.outstanding) - n} more packet(s), not listed here to keep this prompt short. "
                f"Take them in this same launch order from packet `{p['packet_id']}` on: the launch lists from "
                f"`{wave_uri(launch.run_id, wave)}` on (the files from "
                f"`{launch.artifacts_dir / 'runs' / launch.run_id / 'waves' / f'wave-{wave:02d}.json'}`) give each "
                "packet's prompt file, tier and start offset as above; launch only the packets not yet submitted."
            )
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)
