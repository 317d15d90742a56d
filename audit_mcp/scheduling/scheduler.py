"""The wave scheduler: as wide as the model's rate limits and the host allow, and no wider.

Pure: every input (resolved limits, learned state, the host's cap and kind,
the packets' token estimates, ``now``) is explicit, and so is every output.

The physical cap is ``min(C_host, r_I·D/T, r_O·D/O, r_R·D/R)`` at full
utilisation (launch pacing, below, keeps the draw itself under the limits),
with ``r_X`` a per-second rate, ``D`` the mean subagent run time and ``T``,
``O``, ``R`` the input tokens, output tokens and API calls one run takes (a
run makes many calls, each re-sending its context). Only limits known with
medium or high confidence bind; built-in guesses are left to the learned cap.
On a whole-wave host a cached run's input draw counts at its peak, since a
wave's runs all read their packets at once. The learned cap moves by AIMD (``learning``: +1
after a clean, well-used wave; halved on rate-limit failures, a quarter off
when the runs' ``usage`` reports three or more rate-limited calls the host
retried; at most one decrease a minute) and decays back toward the physical
cap with a half-life.

Packets are sized to the same rates: a run re-sends its context on every
call, so one run of a large packet can draw input faster than the bucket
refills however narrow the wave. ``packet_token_budget`` keeps a packet small
enough that one run's charged input (its text times the input ratio) fits
what the bucket refills over the run, above a floor below which the per-call
overhead costs more than it saves; where every input token is charged and
the input limit sets the width, no larger than 20k tokens, since each call
re-sends the whole packet.

Within a run, launches are paced: each packet gets an earliest start (seconds
after the run begins) from a virtual token bucket per known limit, so a wave's
first calls do not collide and the runs draw on the tightest bucket a little
slower than it refills; on a whole-wave host all the packets of a wave share
their first packet's start. Nothing is paced when only the host's slots bind.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from audit_mcp.scheduling.limits import MAX_WAVE_WIDTH, ResolvedLimits, balanced_waves

# Priors for one subagent run, corrected by observed ``usage`` blocks.
DEFAULT_RUN_SECONDS = 240.0
# Charged input tokens a run sends per token of packet text: each call re-sends the context. Anthropic
# does not charge cache reads to the input bucket; other providers count every input token.
DEFAULT_INPUT_RATIO = {"anthropic": 2.0}
UNCACHED_INPUT_RATIO = 8.0
DEFAULT_OUTPUT_TOKENS = 6_000
DEFAULT_CALLS = 15
# The width sustains the limits at full use; launch pacing (below) keeps the draw itself under them.
TARGET_UTILISATION = 1.0
# A cached run reads its packet early: its input draw peaks at about this multiple of its mean. Rolling hosts
# start runs at different times, so the peaks spread out; a whole wave starts at once, so they add up.
WHOLE_WAVE_INPUT_PEAK = 1.5
# A run charged less than this many input tokens per token of packet text is cached (cache reads are free):
# it draws its input as it reads the packet, early. Above it every call re-sends everything.
CACHED_RATIO = 4.0
UNCACHED_PACKET_TOKENS = 20_000  # with every input token charged, packets stay this small when input binds
PACKET_UTILISATION = 0.85  # one run alone stays this far inside the input refill
PACING_UTILISATION = 0.9  # launch pacing keeps each bucket's draw a little under its refill
_PER_MINUTE = ("input_tokens_per_minute", "output_tokens_per_minute", "requests_per_minute")
PESSIMISTIC_FIRST_CALL = 1.25  # the first call carries the packet text plus the system prompt and tools
# Smaller packets add calls, each re-sending the system prompt and tools: below this the overhead costs more
# input than a slower run would.
MIN_SUSTAINABLE_PACKET = 8_000
MIN_PACKET_BUDGET = 8_000  # the first-call bound never packs smaller than this either


@dataclass(frozen=True)
class Learned:
    """What past runs taught about one provider+model."""

    cap: float | None = None
    updated_at: datetime | None = None
    cooldown_until: datetime | None = None
    last_429_at: datetime | None = None
    last_decrease_at: datetime | None = None
    hard_stop: str | None = None
    run_seconds: float | None = None
    input_ratio: float | None = None
    output_tokens: float | None = None
    calls: float | None = None
    observed_limits: dict[str, int] = field(default_factory=dict)
    observed_at: datetime | None = None
    clean_runs: int = 0
    rate_limited_runs: int = 0


@dataclass(frozen=True)
class PacketLoad:
    packet_id: str
    estimated_tokens: int
    rank: int = 0  # launched before higher ranks (deeper reviews take longer)


@dataclass(frozen=True)
class Forecast:
    packets: int
    waves: int
    estimated_input_tokens: int
    estimated_output_tokens: int
    seconds_low: int
    seconds_high: int


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


def decayed_cap(learned: Learned, prior: float, now: datetime, half_life: timedelta) -> float | None:
    """The learned cap pulled back toward ``prior`` by the time since it was learned."""
    if learned.cap is None or learned.updated_at is None:
        return None
    elapsed = max(0.0, (now - learned.updated_at).total_seconds())
    weight = 0.5 ** (elapsed / max(1.0, half_life.total_seconds()))
    return prior + (learned.cap - prior) * weight


def run_profile(learned: Learned, provider: str = "") -> tuple[float, float, float, float]:
    """Seconds, input ratio, output tokens and calls of one subagent run: learned, else the priors."""
    ratio = learned.input_ratio or DEFAULT_INPUT_RATIO.get(provider, UNCACHED_INPUT_RATIO)
    return (learned.run_seconds or DEFAULT_RUN_SECONDS, ratio,
            learned.output_tokens or DEFAULT_OUTPUT_TOKENS, learned.calls or DEFAULT_CALLS)


def _rates(limits: ResolvedLimits) -> dict[str, float]:
    """Refill per second of each limit known well enough to bind.

    A guessed (low-confidence) tier would throttle every better-off user; learning from 429s narrows instead.
    """
    return {key: limits.value(key) / 60.0 for key in _PER_MINUTE if limits.limits[key].confidence != "low"}


def _draws(key: str, tokens: Sequence[float], learned: Learned, provider: str) -> list[float]:
    """What each run (of packets of ``tokens``) draws on the ``key`` bucket."""
    _seconds, ratio, out, calls = run_profile(learned, provider)
    per_token = {"input_tokens_per_minute": ratio}.get(key, 0.0)
    per_run = {"output_tokens_per_minute": out, "requests_per_minute": calls}.get(key, 0.0)
    return [max(1.0, t * per_token + per_run) for t in tokens]


def physical_cap(limits: ResolvedLimits, host_cap: int, mean_tokens: float, learned: Learned,
                 host_kind: str = "rolling") -> tuple[int, str]:
    """The widest wave the limits sustain, and which constraint set it.

    On a whole-wave host every run of a wave reads its packet at the same time, so a cached run's input draw
    (charged as it reads) counts at its peak (``WHOLE_WAVE_INPUT_PEAK``) rather than its mean; an uncached
    run re-sends its whole context on every call and draws evenly.
    """
    seconds, ratio, _out, _calls = run_profile(learned, limits.provider)
    bounds = {"host": min(host_cap, MAX_WAVE_WIDTH)}
    for key, rate in _rates(limits).items():
        per_run = _draws(key, [mean_tokens], learned, limits.provider)[0]
        if host_kind == "whole_wave" and key == "input_tokens_per_minute" and ratio < CACHED_RATIO:
            per_run *= WHOLE_WAVE_INPUT_PEAK
        bounds[key] = math.floor(TARGET_UTILISATION * rate * seconds / per_run + 0.5)
    binding = min(bounds, key=lambda k: bounds[k])
    return max(1, bounds[binding]), binding


def launch_offsets(limits: ResolvedLimits, learned: Learned, tokens: Sequence[int], width: int) -> list[float]:
    """Seconds after a run starts before which each of its packets (in launch order) should not start.

    Each bucket known well enough to bind is played forward as a virtual token bucket that refills at
    ``PACING_UTILISATION`` of its rate and charges a run's whole draw at its start: runs start at once
    while the burst lasts (less one output reservation and one request per slot), then no faster than
    the bucket refills, so first calls do not collide and the throughput stays just under the limit.
    All zeros when nothing binds.
    """
    offsets = [0.0] * len(tokens)
    for key, rate in _rates(limits).items():
        if rate <= 0:  # nothing is ever admitted: the width of one already says so
            continue
        headroom = {"output_tokens_per_minute": width * limits.value("output_tokens"),
                    "requests_per_minute": width}.get(key, 0)
        burst = max(0.0, limits.value(key) - headroom)
        refill = PACING_UTILISATION * rate
        level, at = burst, 0.0
        for i, draw in enumerate(_draws(key, tokens, learned, limits.provider)):
            start = max(at, offsets[i])
            level = min(burst, level + refill * (start - at))
            if level < 0:  # a run starts once the runs before it are paid for
                start -= level / refill
                level = 0.0
            offsets[i], at = start, start
            level -= draw
    return [round(x, 1) for x in offsets]


def _by_wave(offsets: list[float], waves: list[int]) -> list[float]:
    """One earliest start per wave, its first packet's: a whole-wave host launches a wave in one batch, and
    staggering inside it would only hold the wave (and the one after it) back by its last member."""
    out: list[float] = []
    for size in waves:
        out += [offsets[len(out)]] * size
    return out


def launch_interval(limits: ResolvedLimits, learned: Learned, mean_tokens: float) -> tuple[float, str | None]:
    """Seconds between starts once the burst is spent, and the bucket that sets them; (0, None) if none binds."""
    gaps = {key: _draws(key, [mean_tokens], learned, limits.provider)[0] / (PACING_UTILISATION * rate)
            for key, rate in _rates(limits).items() if rate > 0}
    key = max(gaps, key=lambda k: gaps[k], default=None)
    return (round(gaps[key], 1), key) if key is not None else (0.0, None)


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
) -> Schedule:
    """The wave schedule for ``packets`` now; ``max_packet_tokens`` (the configured cap the packets were
    packed under, if known) lets the reasoning say which bound sized them."""
    order = sorted(packets, key=lambda p: (p.rank, -p.estimated_tokens, p.packet_id))
    mean_tokens = sum(p.estimated_tokens for p in order) / len(order) if order else 0.0
    c_phys, binding = physical_cap(limits, host_cap, mean_tokens, learned, host_kind)
    decayed = decayed_cap(learned, c_phys, now, half_life)
    learned_cap = max(1, math.floor(decayed + 0.5)) if decayed is not None else None
    width = max(1, min(c_phys, learned_cap if learned_cap is not None else c_phys, host_cap, MAX_WAVE_WIDTH))
    waves = balanced_waves(len(order), width)
    wave_size = waves[0] if waves else 0
    offsets = launch_offsets(limits, learned, [p.estimated_tokens for p in order], wave_size)
    if host_kind == "whole_wave":
        offsets = _by_wave(offsets, waves)
    interval, pacer = launch_interval(limits, learned, mean_tokens) if any(offsets) else (0.0, None)
    cooldown = learned.cooldown_until if learned.cooldown_until and learned.cooldown_until > now else None
    oversize = _oversize(limits, order)
    seconds, ratio, out, _calls = run_profile(learned, limits.provider)
    why = [f"host allows {host_cap} at once ({host_kind})",
           f"the limits sustain {c_phys} (bound by {binding}, runs of ~{seconds:.0f}s)"]
    if learned_cap is not None:
        why.append(f"learned cap {learned.cap:.1f} decays to {decayed:.1f} toward {c_phys}")
    if interval and host_kind == "whole_wave":
        why.append(f"later waves wait for their launch_offsets (each wave's earliest start, in seconds after the "
                   f"first launch) so runs draw on {pacer} no faster than it refills")
    elif interval:
        first = sum(1 for x in offsets if x == 0)
        why.append(f"{first} may start at once, then one about every {interval:g}s (launch_offsets gives each "
                   f"packet's earliest start, in seconds after the first launch) so runs draw on {pacer} no faster "
                   "than it refills")
    if not _rates(limits) and not (learned.clean_runs or learned.rate_limited_runs or learned.run_seconds):
        why.append("the model's per-minute limits are not known yet (a built-in guess never holds the host back), "
                   "so this first run may meet rate-limit retries; the first 429 message that quotes a limit is "
                   "learned, or set them under [model] in .audit-mcp.toml (or AUDIT_MCP_RPM, AUDIT_MCP_ITPM, "
                   "AUDIT_MCP_OTPM)")
    sustainable = sustainable_packet_tokens(limits, learned)
    fit = admissible_tokens(limits)  # known exactly when ``sustainable`` is: both need the input limit
    if sustainable is not None and fit is not None and sustainable < min(limits.packet_budget,
                                                                         max(MIN_PACKET_BUDGET, fit)):
        why.append(f"packets are kept to ~{sustainable:,} tokens so that one run draws input_tokens_per_minute "
                   "no faster than it refills")
    if max_packet_tokens is not None and packet_token_budget(limits, learned, max_packet_tokens, host_cap) < (
            _budget_before_uncached_cap(limits, learned, max_packet_tokens)):  # only the uncached bound does that
        why.append(f"packets are kept to ~{UNCACHED_PACKET_TOKENS:,} tokens: every call re-sends the whole context "
                   "(cache reads are charged), so smaller packets review the same code for fewer input tokens")
    if (rate := _rates(limits).get("input_tokens_per_minute")) and mean_tokens * ratio > rate * seconds:
        why.append(f"one run alone draws ~{mean_tokens * ratio / seconds * 60:,.0f} input tokens a minute, more "
                   "than the limit: expect rate-limit retries at any width")
    if cooldown:
        why.append(f"cooling down until {cooldown.isoformat()}")
    if oversize:
        why.append(f"{len(oversize)} packet(s) exceed a token bucket")
    if learned.hard_stop:
        why.append(f"hard stop: {learned.hard_stop}")
    total_in = int(sum(p.estimated_tokens for p in order) * ratio)
    forecast = _forecast(limits, order, waves, host_kind, seconds, total_in, int(out * len(order)), now, cooldown)
    return Schedule(
        wave_size=wave_size, waves=waves, cooldown_until=cooldown,
        estimated_wave_tokens=sum(p.estimated_tokens for p in order[:wave_size]),
        order=[p.packet_id for p in order], physical_cap=c_phys, learned_cap=learned_cap,
        blocked=learned.hard_stop, oversize=oversize, forecast=forecast,
        reasoning=f"wave size {wave_size}: " + "; ".join(why) + ".",
        launch_interval_seconds=interval, launch_offsets=offsets,
    )


def admissible_tokens(limits: ResolvedLimits) -> int | None:
    """The largest packet whose first call fits the input bucket; None unless the limit is known well enough."""
    itpm = limits.limits["input_tokens_per_minute"]
    if itpm.confidence == "low":
        return None
    return int(itpm.value / PESSIMISTIC_FIRST_CALL)


def sustainable_packet_tokens(limits: ResolvedLimits, learned: Learned) -> int | None:
    """The largest packet one run can review without drawing input faster than the bucket refills.

    A run charges about ``tokens × input_ratio`` over ``run_seconds``; at ``PACKET_UTILISATION`` of the
    input rate that allows ``rate × seconds × utilisation / ratio`` tokens, never below
    ``MIN_SUSTAINABLE_PACKET``. None unless the input limit is known (medium or high). Requests and output
    tokens per run do not shrink with the packet, so those limits bound the width, not the packet.
    """
    rate = _rates(limits).get("input_tokens_per_minute")
    if rate is None:
        return None
    seconds, ratio, _out, _calls = run_profile(learned, limits.provider)
    return max(MIN_SUSTAINABLE_PACKET, int(rate * seconds * PACKET_UTILISATION / ratio))


def packet_token_budget(limits: ResolvedLimits, learned: Learned, max_packet_tokens: int, host_cap: int) -> int:
    """Tokens a packet may take: the context, the configured cap, the input bucket, a run's sustainable draw,
    and, where every input token is charged and the input limit binds, ``UNCACHED_PACKET_TOKENS``."""
    budget = _budget_before_uncached_cap(limits, learned, max_packet_tokens)
    if _uncached_input_binds(limits, learned, budget, host_cap):
        # Every call re-sends the whole context, so a run's input grows with the square of its packet:
        # smaller packets review the same code for fewer input tokens, down to where the system prompt
        # re-sent on every call dominates. Where the host's slots bind instead, fewer and larger packets
        # make fewer calls, and that is what counts.
        budget = min(budget, UNCACHED_PACKET_TOKENS)
    return budget


def _budget_before_uncached_cap(limits: ResolvedLimits, learned: Learned, max_packet_tokens: int) -> int:
    budget = min(limits.packet_budget, max_packet_tokens)
    if (fit := admissible_tokens(limits)) is not None:
        # A packet whose first call cannot fit the input bucket would never be admitted: pack smaller.
        budget = min(budget, max(MIN_PACKET_BUDGET, fit))
    if (run := sustainable_packet_tokens(limits, learned)) is not None:
        budget = min(budget, run)
    return budget


def _uncached_input_binds(limits: ResolvedLimits, learned: Learned, budget: int, host_cap: int) -> bool:
    """Whether every input token is charged and packets of ``budget`` tokens leave the input limit, not the
    host's slots, setting the width."""
    seconds, ratio, _out, _calls = run_profile(learned, limits.provider)
    rate = _rates(limits).get("input_tokens_per_minute")
    if rate is None or ratio < CACHED_RATIO:
        return False
    return TARGET_UTILISATION * rate * seconds / (budget * ratio) < min(host_cap, MAX_WAVE_WIDTH)


def _oversize(limits: ResolvedLimits, packets: Sequence[PacketLoad]) -> list[str]:
    """Packets that could never be admitted; only judged when the limits are known (medium or high)."""
    fit = admissible_tokens(limits)
    out = [p.packet_id for p in packets if fit is not None and p.estimated_tokens > fit]
    otpm, output = limits.limits["output_tokens_per_minute"], limits.limits["output_tokens"]
    if otpm.confidence != "low" and output.confidence != "low" and output.value > otpm.value:
        out = [p.packet_id for p in packets]
    return out


def _forecast(
    limits: ResolvedLimits, packets: Sequence[PacketLoad], waves: list[int], host_kind: str, seconds: float,
    total_in: int, total_out: int, now: datetime, cooldown: datetime | None,
) -> Forecast:
    width = waves[0] if waves else 1
    wait = (cooldown - now).total_seconds() if cooldown else 0.0
    # Like the physical cap, the token-rate floor counts only limits known well enough to bind.
    rates = _rates(limits)
    by_tokens = max([0.0] + [total / rates[key] for key, total in
                             (("input_tokens_per_minute", total_in), ("output_tokens_per_minute", total_out))
                             if rates.get(key, 0.0) > 0])
    by_slots = len(waves) * seconds if host_kind == "whole_wave" else len(packets) * seconds / width
    low = wait + max(by_tokens, by_slots * 0.5, seconds * 0.5 if packets else 0.0)
    high = wait + max(by_tokens, by_slots) * 2.0
    return Forecast(packets=len(packets), waves=len(waves), estimated_input_tokens=total_in,
                    estimated_output_tokens=total_out, seconds_low=int(low), seconds_high=math.ceil(high))
