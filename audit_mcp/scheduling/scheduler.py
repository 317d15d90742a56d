"""The wave scheduler: as wide as the model's rate limits and the host allow, and no wider.

Pure: every input (resolved limits, learned state, the host's cap and kind,
the packets' token estimates, ``now``) is explicit, and so is every output.

The physical cap is ``min(C_host, r_I·D/T, r_O·D/O, r_R·D/R)`` at full
utilisation (launch pacing, below, keeps the draw itself under the limits),
with ``r_X`` a per-second rate, ``D`` the mean subagent run time and ``T``,
``O``, ``R`` the input tokens, output tokens and API calls one run takes (a
run makes many calls, each re-sending its context). Only limits known with
medium or high confidence bind; built-in guesses are left to the learned cap.
On a whole-wave host a wave's cached runs all read their packets at once,
so the wave must also fit the input bucket's burst plus its refill while
they read, in whole runs; a run is added to every wave only once that
estimate clears the next whole number by a margin (``held_runs``), so that
drift of a few percent in the learned run profile does not. The learned cap moves by AIMD (``learning``: +1
after a clean, well-used wave; halved on rate-limit failures, a quarter off
when the runs' ``usage`` reports three or more rate-limited calls the host
retried; at most one decrease a minute) and decays back toward the physical
cap with a half-life.

None of these is rounded: the width is a capacity, how many runs at once on
average, and need not be whole. A rolling host keeps the slots it needs (2.5:
three) and launch pacing uses the last only part of the time (a bucket that
binds paces it by its refill; a learned cap, by slot-seconds, ``slot_offsets``);
a whole-wave host gets waves of the two whole sizes around it, mixed evenly
(``limits.composed_waves``: 3, 2, 3, 2, ...).

Packets are sized to the same rates (``budget``); the run profile and the
rates that bind are in ``profile``.

Within a run, launches are paced: each packet gets an earliest start (seconds
after the run begins) from a virtual token bucket per known limit, so a wave's
first calls do not collide and the runs draw on the tightest bucket a little
slower than it refills; on a whole-wave host all the packets of a wave share
their first packet's start. Nothing is paced when only the host's slots bind.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from audit_mcp.scheduling import profile, provenance, reasons
from audit_mcp.scheduling.budget import admissible_tokens
from audit_mcp.scheduling.launch_pacing import SLOT_PACER, by_wave, launch_interval, launch_offsets, slot_offsets
from audit_mcp.scheduling.limits import MAX_WAVE_WIDTH, ResolvedLimits, waves_for
from audit_mcp.scheduling.profile import (
    CACHED_RATIO,
    Learned,
    binding_rates,
    decayed_cap,
    draws,
    durations,
    run_profile,
)

# A cached run reads its packet early: its input draw peaks at about this multiple of its mean. Rolling hosts
# start runs at different times, so the peaks spread out; a whole wave starts at once, so they add up, and
# the bucket's burst is what absorbs them.
WHOLE_WAVE_INPUT_PEAK = 1.5
WHOLE_WITHIN = 0.05
SLOW_START_WIDTH = 2  # the first wave's width when nothing at all is known about the model's limits
# The whole-wave burst bound moves off the whole runs in force only once its estimate leaves them by this share.
BURST_MARGIN = 0.05


@dataclass(frozen=True)
class PacketLoad:
    packet_id: str
    estimated_tokens: int
    rank: int = 0  # launched before higher ranks (deeper reviews take longer)
    units: int = 1  # files or chunks in it: a packet of one cannot be packed smaller


@dataclass(frozen=True)
class Progress:
    """Where a run in flight stands, for pacing the packets it has not launched yet."""

    elapsed: float  # seconds since the run's first launch
    running: int  # runs going now
    waiting: frozenset[str]  # packets not launched yet


@dataclass(frozen=True)
class Forecast:
    packets: int
    waves: int
    estimated_input_tokens: int
    estimated_output_tokens: int
    seconds_low: int
    seconds_high: int
    # What sets the width: "host", "packets", "slow_start", "learned_cap", or the per-minute limit that binds.
    paced_by: str = "host"
    pace: str = ""  # the same in a sentence, naming a configured limit that sets the pace
    # Each per-minute limit: its value, where it came from, and whether it binds (``provenance``).
    limits: dict[str, dict[str, object]] = field(default_factory=dict)


@dataclass(frozen=True)
class Schedule:
    wave_size: int
    waves: list[int]
    cooldown_until: datetime | None
    estimated_wave_tokens: int
    order: list[str]
    physical_cap: int
    learned_cap: int | None
    blocked: str | None
    oversize: list[str]
    forecast: Forecast
    reasoning: str
    # Pacing within a run: seconds between starts once the burst is spent, and each packet's earliest
    # start (seconds after the run's first launch, aligned with ``order``); zeros when no known limit binds.
    launch_interval_seconds: float
    launch_offsets: list[float]
    dispatch_mode: str = "rolling"  # how the host is told to dispatch: the mode the schedule was made for
    slow_start: bool = False  # nothing known yet: the width starts narrow and doubles per clean wave
    packet_offsets: list[float] | None = None  # each packet's own earliest start, before whole waves share one
    # How many runs at once on average: ``wave_size`` slots on a rolling host, the last paced to be used only
    # part of the time where this is not whole; on a whole-wave host, the mean of ``waves``. 0: ``wave_size``.
    capacity: float = 0.0


def physical_cap(
    limits: ResolvedLimits, host_cap: int, mean_tokens: float, learned: Learned, host_kind: str = "rolling"
) -> tuple[float, str]:
    """The capacity the limits sustain (how many runs at once on average: it need not be whole), and which
    constraint set it.

    A rate's capacity is what its refill sustains over a run; the host's is its slots. Nothing is rounded:
    a rolling host keeps the slots the capacity needs (``slots``) and launch pacing holds the draw to the
    refill, a whole-wave host mixes waves of the two whole sizes around it (``limits.composed_waves``).

    On a whole-wave host every run of a wave reads its packet at the same time: a cached run's input (charged
    as it reads) is drawn at ``WHOLE_WAVE_INPUT_PEAK`` times its mean rate, early, so the wave's draw must fit
    the bucket's burst plus its refill over that reading time, not only the refill over the run. An uncached
    run re-sends its whole context on every call and draws evenly.
    """
    bounds = capacity_bounds(limits, host_cap, mean_tokens, learned, host_kind)
    binding = min(bounds, key=lambda k: bounds[k])
    return max(1.0, bounds[binding]), binding


def capacity_bounds(
    limits: ResolvedLimits, host_cap: int, mean_tokens: float, learned: Learned, host_kind: str = "rolling"
) -> dict[str, float]:
    """The capacity each constraint alone sustains (``physical_cap`` takes the least, and at least one run):
    the host's slots, and each binding limit's, unrounded and unfloored."""
    seconds, ratio, _out, _calls = run_profile(learned, limits.provider, mean_tokens)
    bounds = {"host": float(min(host_cap, MAX_WAVE_WIDTH))}
    for key, rate in binding_rates(limits).items():
        per_run = draws(key, [mean_tokens], learned, limits.provider)[0]
        bounds[key] = profile.TARGET_UTILISATION * rate * seconds / per_run
        if host_kind == "whole_wave" and key == "input_tokens_per_minute" and ratio < CACHED_RATIO:
            # The wave's runs read their packets together, drawing the wave's input within the first
            # 1/WHOLE_WAVE_INPUT_PEAK of a run. Nothing paces inside a wave, so that draw must fit what the
            # bucket holds (a minute's worth) plus what it refills meanwhile. That bounds every wave, not their
            # mean (each starts with the bucket about as full as the last did): whole runs, rounded down.
            peak = limits.value(key) + rate * seconds / WHOLE_WAVE_INPUT_PEAK
            runs = held_runs(profile.TARGET_UTILISATION * peak / per_run, learned.burst_runs)
            bounds[key] = min(bounds[key], float(runs))
    return bounds


def held_runs(estimate: float, held: int | None) -> int:
    """The whole-wave burst bound in whole runs: ``estimate`` rounded down, except that a bound in force
    (``held``, ``Learned.burst_runs``) stays while the estimate is within ``BURST_MARGIN`` of its band. The
    estimate moves with every packet's usage (its seconds, its draw) by a few percent; near a whole number
    that alone would add or drop a whole run per wave, over and over, and whether it does would follow
    noise (a short retry stretching one run) rather than the bucket."""
    whole = max(0, math.floor(estimate))
    if held is not None and held <= estimate < (held + 1) * (1 + BURST_MARGIN):
        return held
    return whole


def burst_runs(limits: ResolvedLimits, mean_tokens: float, learned: Learned, host_kind: str) -> int | None:
    """The whole-wave burst bound now in force for runs of ``mean_tokens`` (None where none applies: a rolling
    host, an uncached run, an input limit not known well enough to bind): what learning keeps as
    ``Learned.burst_runs``."""
    rate = binding_rates(limits).get("input_tokens_per_minute")
    seconds, ratio, _out, _calls = run_profile(learned, limits.provider, mean_tokens)
    if host_kind != "whole_wave" or rate is None or ratio >= CACHED_RATIO:
        return None
    key = "input_tokens_per_minute"
    per_run = draws(key, [mean_tokens], learned, limits.provider)[0]
    peak = limits.value(key) + rate * seconds / WHOLE_WAVE_INPUT_PEAK
    return held_runs(profile.TARGET_UTILISATION * peak / per_run, learned.burst_runs)


def settled(capacity: float) -> float:
    """A capacity within ``WHOLE_WITHIN`` of a whole number is that number: pacing a slot for a few percent of
    the time only adds waits."""
    whole = float(round(capacity))
    return whole if abs(capacity - whole) < WHOLE_WITHIN else capacity


def schedule(
    limits: ResolvedLimits,
    learned: Learned,
    host_cap: int,
    host_kind: str,
    packets: Sequence[PacketLoad],
    now: datetime,
    *,
    half_life: timedelta = timedelta(hours=24),
    max_packet_tokens: int | None = None,
    progress: Progress | None = None,
) -> Schedule:
    """The wave schedule for ``packets`` now; ``max_packet_tokens`` (the configured cap the packets were
    packed under, if known) lets the reasoning say which bound sized them; ``progress``, for a run in flight,
    paces the packets not launched yet from where it stands.

    ``host_kind`` is how the host dispatches, and the schedule is made for it: a ``rolling`` host keeps the
    width running (refilling a slot as soon as one frees), a ``whole_wave`` host launches balanced waves.
    """
    order = sorted(packets, key=lambda p: (p.rank, -p.estimated_tokens, p.packet_id))
    mean_tokens = sum(p.estimated_tokens for p in order) / len(order) if order else 0.0
    c_phys, binding = physical_cap(limits, host_cap, mean_tokens, learned, host_kind)
    decayed = decayed_cap(learned, c_phys, now, half_life)
    slow = decayed is None and slow_start(limits, learned)
    cap = float(SLOW_START_WIDTH) if slow else decayed
    capacity = settled(max(1.0, min(c_phys, cap if cap is not None else c_phys, host_cap, MAX_WAVE_WIDTH)))
    learned_cap = None if cap is None else max(1, math.floor(cap + 0.5))
    waves = waves_for(len(order), capacity, host_kind)
    wave_size = waves[0] if waves else 0
    tokens = [p.estimated_tokens for p in order]
    # Where the learned cap, not a rate, holds a rolling host below whole slots, the slots are paced to it;
    # a rate that binds is paced by its own bucket, below.
    paced = host_kind == "rolling" and cap is not None and capacity < settled(c_phys)
    spaced = _spaced(capacity, order, durations(tokens, learned, limits.provider), progress) if paced else None
    starts = launch_offsets(limits, learned, tokens, wave_size, spaced)
    offsets = by_wave(starts, waves) if host_kind == "whole_wave" else starts
    interval, pacer = launch_interval(limits, learned, mean_tokens) if any(offsets) else (0.0, None)
    if spaced is not None and any(offsets):  # the slots' pace, where it is slower than any bucket's
        gap = round(sum(durations([mean_tokens], learned, limits.provider)) / capacity, 1)
        interval, pacer = (gap, SLOT_PACER) if gap > interval else (interval, pacer)
    cooldown = learned.cooldown_until if learned.cooldown_until and learned.cooldown_until > now else None
    seconds, ratio, out, _calls = run_profile(learned, limits.provider, mean_tokens)
    others = settled(min(c_phys, host_cap, MAX_WAVE_WIDTH))
    if len(order) < min(others, cap or others):
        paced_by = "packets"
    elif cap is not None and settled(cap) < others:
        paced_by = "slow_start" if slow else "learned_cap"
    else:
        paced_by = binding
    facts = reasons.Facts(
        limits=limits,
        learned=learned,
        host_cap=host_cap,
        host_kind=host_kind,
        width=wave_size,
        physical_cap=_shown(c_phys),
        binding=binding,
        learned_cap=learned_cap,
        decayed=decayed,
        slow=slow,
        paced_by=paced_by,
        offsets=offsets,
        interval=interval,
        pacer=pacer,
        mean_tokens=mean_tokens,
        capacity=capacity,
        max_packet_tokens=max_packet_tokens,
        cooldown=cooldown,
        oversize=_oversize(limits, order),
    )
    total_in = int(sum(p.estimated_tokens for p in order) * ratio)
    total_out = int(out * len(order))
    forecast = _forecast(limits, order, waves, capacity, host_kind, seconds, total_in, total_out, now, cooldown)
    return Schedule(
        wave_size=wave_size,
        waves=waves,
        cooldown_until=cooldown,
        estimated_wave_tokens=sum(p.estimated_tokens for p in order[:wave_size]),
        order=[p.packet_id for p in order],
        physical_cap=_shown(c_phys),
        learned_cap=None if slow else learned_cap,  # slow start is a guess, not something learned
        blocked=learned.hard_stop,
        oversize=facts.oversize,
        forecast=replace(
            forecast, paced_by=paced_by, pace=reasons.pace(facts), limits=provenance.limit_sources(limits, learned)
        ),
        reasoning=reasons.reasoning(facts),
        launch_interval_seconds=interval,
        launch_offsets=offsets,
        dispatch_mode=host_kind,
        slow_start=slow,
        packet_offsets=starts,
        capacity=capacity,
    )


def _spaced(
    capacity: float, order: Sequence[PacketLoad], lengths: list[float], progress: Progress | None
) -> list[float]:
    """The slots' pacing (``slot_offsets``) of a run, or of the packets a run in flight has not launched yet."""
    if progress is None:
        return slot_offsets(capacity, lengths)
    at = [i for i, p in enumerate(order) if p.packet_id in progress.waiting]
    out = [0.0] * len(order)
    fresh = slot_offsets(capacity, [lengths[i] for i in at], progress.elapsed, progress.running)
    for i, start in zip(at, fresh, strict=True):
        out[i] = start
    return out


def _shown(capacity: float) -> int:
    """A capacity as the whole number of runs a person reads it as."""
    return max(1, math.floor(capacity + 0.5))


def slow_start(limits: ResolvedLimits, learned: Learned) -> bool:
    """Whether nothing is known about the model: no limit that binds, none observed, nothing learned. Then
    the first wave is ``SLOW_START_WIDTH`` wide and each clean wave doubles it, instead of trusting a
    built-in table that is right for nobody in particular."""
    return not binding_rates(limits) and not learned.known


def _oversize(limits: ResolvedLimits, packets: Sequence[PacketLoad]) -> list[str]:
    """Packets that could never be admitted; only judged when the limits are known (medium or high)."""
    fit = admissible_tokens(limits)
    out = [p.packet_id for p in packets if fit is not None and p.estimated_tokens > fit]
    otpm, output = limits.limits["output_tokens_per_minute"], limits.limits["output_tokens"]
    if otpm.confidence != "low" and output.confidence != "low" and output.value > otpm.value:
        out = [p.packet_id for p in packets]
    return out


def _forecast(
    limits: ResolvedLimits,
    packets: Sequence[PacketLoad],
    waves: list[int],
    capacity: float,
    host_kind: str,
    seconds: float,
    total_in: int,
    total_out: int,
    now: datetime,
    cooldown: datetime | None,
) -> Forecast:
    width = min(capacity, waves[0]) if waves else 1.0
    wait = (cooldown - now).total_seconds() if cooldown else 0.0
    # Like the physical cap, the token-rate floor counts only limits known well enough to bind.
    rates = binding_rates(limits)
    by_tokens = max(
        [0.0]
        + [
            total / rates[key]
            for key, total in (("input_tokens_per_minute", total_in), ("output_tokens_per_minute", total_out))
            if rates.get(key, 0.0) > 0
        ]
    )
    by_slots = len(waves) * seconds if host_kind == "whole_wave" else len(packets) * seconds / width
    low = wait + max(by_tokens, by_slots * 0.5, seconds * 0.5 if packets else 0.0)
    high = wait + max(by_tokens, by_slots) * 2.0
    return Forecast(
        packets=len(packets),
        waves=len(waves),
        estimated_input_tokens=total_in,
        estimated_output_tokens=total_out,
        seconds_low=int(low),
        seconds_high=math.ceil(high),
    )
