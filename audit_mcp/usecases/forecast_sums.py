"""The whole audit's forecast from its packets' sizes: runs, tokens with and without prompt caching, wall time
at the host's width, and cost where ``[prices]`` prices the model. Pure: sizes and settings in, a document out.

Each obligation (the context pass, review, verification) is a list of packet sizes. The packets of the open
run still out go first, as one run; then each obligation's packets in runs of at most ``max_packets_per_run``,
in the order obligations come. Every run is scheduled by the wave scheduler (``scheduling.scheduler``), with
the limits, learned state and host it would be dispatched with now, and the wall time is the sum of the runs'
time ranges (runs go one after another).

Tokens, per token of packet text a subagent reads: a run makes many calls, each sending its context again.
Without prompt caching every one of those input tokens is charged as input; with it, most of them are cache
reads and only the rest (uncached input and cache writes) is fresh. The ratios are what runs reported in
``usage`` where that was learned, else the scheduler's priors (``scheduling.profile``); output tokens are the
scheduler's per run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from audit_mcp.core.prices import ModelPrices
from audit_mcp.scheduling.limits import ResolvedLimits
from audit_mcp.scheduling.pacing import forecast_view
from audit_mcp.scheduling.profile import DEFAULT_INPUT_RATIO, UNCACHED_INPUT_RATIO, Learned, run_profile
from audit_mcp.scheduling.scheduler import Forecast, PacketLoad, schedule

# Fresh input (uncached input and cache writes) per token of packet text when a run's calls hit the prompt
# cache, before any run reported its usage: the scheduler's prior for a provider that caches.
CACHED_RATIO_PRIOR = min(DEFAULT_INPUT_RATIO.values())
OBLIGATIONS = ("context", "review", "verification")
UNKNOWN_MODEL = "unknown"  # the model's name in resolved limits when nobody named one
_MILLION = 1_000_000


@dataclass(frozen=True)
class Obligation:
    """One obligation's packets still to come: each one's estimated tokens, and what they cover."""

    name: str  # context, review or verification
    packets: tuple[int, ...] = ()  # not dispatched yet, in the order they would be
    cells: int = 0  # the cells they cover (verification: the findings expected to need a verifier)
    open_packets: tuple[int, ...] = ()  # dispatched in the open run, not answered yet
    estimated: bool = False  # the packets are an estimate, not the packing dispatch would make now
    how: str = ""  # how the packets were counted


@dataclass(frozen=True)
class Setting:
    """What dispatch would plan with now: limits, learned state, host, run size, prices."""

    limits: ResolvedLimits
    learned: Learned
    host_cap: int
    host_kind: str
    now: datetime
    half_life: timedelta = timedelta(hours=24)
    max_packet_tokens: int | None = None
    max_packets_per_run: int = 200
    prices: ModelPrices | None = None
    price_source: str | None = None
    currency: str = "USD"
    notes: Sequence[str] = field(default_factory=tuple)


def forecast(obligations: Sequence[Obligation], s: Setting) -> dict[str, Any]:
    """The forecast document: totals, each obligation, tokens, time and cost."""
    runs: list[tuple[int, ...]] = []
    open_run = tuple(t for o in obligations for t in o.open_packets)
    if open_run:
        runs.append(open_run)
    per: dict[str, dict[str, Any]] = {}
    for o in obligations:
        chunks = [o.packets[i : i + s.max_packets_per_run] for i in range(0, len(o.packets), s.max_packets_per_run)]
        runs += chunks
        per[o.name] = {
            "packets": len(o.packets) + len(o.open_packets),
            "runs": len(chunks) + (1 if o.open_packets else 0),
            "in_open_run": len(o.open_packets),
            "cells": o.cells,
            "packet_tokens": sum(o.packets) + sum(o.open_packets),
            "estimated": o.estimated,
            "how": o.how,
        }
    timed = [_run(run, s, first=n == 0) for n, run in enumerate(runs)]
    low = sum(f.seconds_low for f, _ in timed)
    high = sum(f.seconds_high for f, _ in timed)
    packets = sum(len(r) for r in runs)
    text = sum(sum(r) for r in runs)
    tokens = _tokens(text, sum(f.estimated_output_tokens for f, _ in timed), s)
    shown = forecast_view(Forecast(packets, sum(f.waves for f, _ in timed), 0, 0, low, high))
    return {
        "packets": packets,
        "runs": len(runs),
        "obligations": per,
        "tokens": tokens,
        "seconds_low": low,
        "seconds_high": high,
        "time_range": shown["time_range"],
        "host_width": s.host_cap,
        "planned_width": timed[0][1] if timed else 0,
        "dispatch_mode": s.host_kind,
        "model": s.limits.model,
        "provider": s.limits.provider,
        "cost": cost(tokens, s),
        "notes": list(s.notes),
    }


def _run(packets: tuple[int, ...], s: Setting, *, first: bool) -> tuple[Forecast, int]:
    """One run's forecast and width; a cooldown in force is waited for once, before the first run."""
    now = s.now
    until = s.learned.cooldown_until
    if not first and until is not None and until > now:
        now = until
    planned = schedule(
        s.limits,
        s.learned,
        s.host_cap,
        s.host_kind,
        [PacketLoad(f"P{n:05d}", t) for n, t in enumerate(packets)],
        now,
        half_life=s.half_life,
        max_packet_tokens=s.max_packet_tokens,
    )
    return planned.forecast, planned.wave_size


def ratios(learned: Learned, provider: str, mean_tokens: float) -> tuple[float, float]:
    """Input tokens per token of packet text without prompt caching, and fresh input (uncached input and
    cache writes) with it: a provider that caches charges its limit with the second, and runs report it; one
    that does not reports the first."""
    caches = provider in DEFAULT_INPUT_RATIO
    learned_ratio = run_profile(learned, provider, mean_tokens or None)[1] if learned.input_ratio else None
    uncached = learned_ratio if learned_ratio is not None and not caches else UNCACHED_INPUT_RATIO
    cached = (
        learned_ratio if learned_ratio is not None and caches else DEFAULT_INPUT_RATIO.get(provider, CACHED_RATIO_PRIOR)
    )
    return max(uncached, cached), min(cached, uncached)


def _tokens(text: int, output: int, s: Setting) -> dict[str, int]:
    packets = max(1, text)
    uncached, cached = ratios(s.learned, s.limits.provider, text / packets)
    return {
        "packet_text": text,
        "input_without_caching": round(text * uncached),
        "input_with_caching": round(text * cached),
        "cache_reads_with_caching": round(text * (uncached - cached)),
        "output": output,
    }


def cost(tokens: Mapping[str, int], s: Setting) -> dict[str, Any]:
    """The forecast's cost without and with prompt caching, or why there is none."""
    if s.prices is None:
        model = s.limits.model
        known = model != UNKNOWN_MODEL
        return {
            "currency": None,
            "without_caching": None,
            "with_caching": None,
            "note": (f"no price is configured for {model}" if known else "the reviewers' model is not known")
            + ": "
            + ("" if known else "name it (--host-model MODEL, or [host] model in your config), then ")
            + f'add [prices."{model if known else "MODEL"}"] with input and output (and cache_read, '
            "cache_write) per million tokens to your config to see a cost",
        }
    p = s.prices
    assert p.input is not None and p.output is not None
    out = tokens["output"] * p.output
    without = (tokens["input_without_caching"] * p.input + out) / _MILLION
    doc: dict[str, Any] = {
        "currency": s.currency,
        "without_caching": round(without, 2),
        "with_caching": None,
        "prices": {**p.model_dump(), "from": s.price_source, "per": "million tokens"},
    }
    if p.cache_read is None:
        doc["note"] = f"set cache_read in {s.price_source} to see the cost with prompt caching"
    else:
        fresh = p.cache_write if p.cache_write is not None else p.input
        reads = tokens["cache_reads_with_caching"] * p.cache_read
        doc["with_caching"] = round((tokens["input_with_caching"] * fresh + reads + out) / _MILLION, 2)
        if p.cache_write is None:
            doc["note"] = f"cache writes are priced as input (set cache_write in {s.price_source} if they cost more)"
    return doc


def used_cost(usage: Mapping[str, float], prices: ModelPrices | None, currency: str) -> float | None:
    """What reported usage cost at ``prices``: its input tokens (as workers count them: uncached input and cache
    writes, not cache reads) at the input price, its output at the output price; None without prices."""
    if prices is None or prices.input is None or prices.output is None:
        return None
    total = usage.get("input_tokens", 0.0) * prices.input + usage.get("output_tokens", 0.0) * prices.output
    return round(total / _MILLION, 2)
