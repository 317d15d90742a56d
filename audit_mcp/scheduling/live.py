"""The schedule of a run in flight: what the host should do with the packets it has not launched yet.

Pure, and the same computation as the dispatch plan's: the run's packets are scheduled again with what has
been learned since (usage and failures arrive as the run goes), in the plan's launch order and in the same
time frame (seconds after the run's first start), and the answer is cut down to the packets still waiting:
the width to keep running (or the next whole waves), a cooldown, and each one's earliest start. A packet
whose first call no longer fits the input bucket (a 429 message just quoted a smaller limit), or that is
far larger than the run would now be packed with, is held back: launching it would fail, or review its
code for many more input tokens than a smaller packet; it goes back to the queue, packed again next run.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from audit_mcp.scheduling.budget import admissible_tokens, packet_token_budget
from audit_mcp.scheduling.limits import ResolvedLimits, waves_for
from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.scheduler import PacketLoad, Progress, Schedule, schedule

# A waiting packet this many times larger than the budget would now be is held back and packed again: a change
# that large (a limit just learned) outweighs the run boundary it costs; a smaller drift does not.
REPACK_FACTOR = 2.0


@dataclass(frozen=True)
class Live:
    schedule: Schedule  # over every packet of the run, with what is known now
    waiting: list[str]  # packets not launched yet, in launch order (the held ones left out)
    waves: list[int]  # how the waiting packets go out: balanced whole waves, or full ones at the rolling width
    offsets: dict[str, float]  # each waiting packet's earliest start, seconds after the run's first start
    # Packets not to launch: their first call cannot fit the input bucket as now known (a 429 message quoted
    # a smaller limit than the run was packed for). They go back to the queue, packed again for the next run.
    held: list[str] = field(default_factory=list)

    @property
    def width(self) -> int:
        return self.schedule.wave_size

    @property
    def capacity(self) -> float:
        """Runs at once on average (``Schedule.capacity``): what evidence arriving now is judged against."""
        return self.schedule.capacity or float(self.schedule.wave_size)


def _repack(
    packet: PacketLoad, limits: ResolvedLimits, learned: Learned, host_cap: int, max_packet_tokens: int | None
) -> bool:
    """Whether a packet is better packed again than launched: its first call cannot fit the input bucket as
    now known, or it is over ``REPACK_FACTOR`` times the budget the run would be packed with now (a limit a
    429 message quoted, or usage, showed its runs draw far more than it was packed for). A packet of one
    file or chunk would come back the same, so it is always launched."""
    if packet.units <= 1:
        return False
    fit = admissible_tokens(limits)
    if fit is not None and packet.estimated_tokens > fit:
        return True
    if max_packet_tokens is None:
        return False
    return packet.estimated_tokens > REPACK_FACTOR * packet_token_budget(limits, learned, max_packet_tokens, host_cap)


def replan(
    limits: ResolvedLimits,
    learned: Learned,
    host_cap: int,
    host_kind: str,
    packets: Sequence[PacketLoad],
    waiting: Collection[str],
    now: datetime,
    *,
    half_life: timedelta = timedelta(hours=24),
    max_packet_tokens: int | None = None,
    elapsed: float | None = None,
    running: int = 0,
) -> Live:
    """The run's schedule now, for the ``waiting`` packets (those neither launched, submitted nor failed);
    ``elapsed`` (seconds since the run's first launch, if known) and ``running`` (runs going now) pace them
    from where the run stands."""
    progress = Progress(elapsed, running, frozenset(waiting)) if elapsed is not None else None
    planned = schedule(
        limits,
        learned,
        host_cap,
        host_kind,
        packets,
        now,
        half_life=half_life,
        max_packet_tokens=max_packet_tokens,
        progress=progress,
    )
    by_id = {p.packet_id: p for p in packets}
    held = [
        pid
        for pid in planned.order
        if pid in waiting and _repack(by_id[pid], limits, learned, host_cap, max_packet_tokens)
    ]
    order = [pid for pid in planned.order if pid in waiting and pid not in held]
    waves = waves_for(len(order), planned.capacity or planned.wave_size, host_kind)
    at = dict(zip(planned.order, planned.packet_offsets or planned.launch_offsets, strict=True))
    offsets = {pid: at[pid] for pid in order}
    if host_kind == "whole_wave":  # a wave goes out together, at its first packet's start
        position = 0
        for size in waves:
            first = at[order[position]]
            offsets.update({pid: first for pid in order[position : position + size]})
            position += size
    return Live(planned, order, waves, offsets, held)
