"""A discrete-event simulation of an audit against a rate-limited provider, to measure the wave scheduler.

The fake provider has three continuously refilling token buckets (requests,
input tokens, output tokens; the output bucket is charged ``max_tokens`` at
admission and refunded the unused part at completion) and answers a call that
does not fit with a 429, a ``retry-after`` and the rate-limit headers. A
subagent is a sequence of calls with tool time between them; the host retries
a throttled call up to ten times (honouring ``retry-after``), then the packet
fails and is requeued into the next run. Hosts have a cap C and are rolling
(a slot refills as soon as it frees) or whole-wave (a wave waits for its
slowest member); both start no packet before the schedule's launch offset
for it (seconds after the run begins).

Three strategies are compared on the same workloads: ``scheduler`` (the real
``audit_mcp.scheduler`` with limit priors that are wrong by ¼–4×, learning
from the failures' texts and the usage blocks between runs), ``naive`` (the
host's cap C in balanced waves: the fixed width this scheduler replaced) and
``oracle`` (the scheduler's formula with the true limits and run profile).
Every makespan is divided by a lower bound (``lower_bound``) that no schedule
can beat. Besides 429s over all calls, the summary gives the same share over
the scenarios where one subagent alone stays inside the input bucket
(``rate_limited_share_lone_run_fits``): where it does not, its own calls are
throttled whatever the width, order or pacing.

Usage: ``python benchmarks/scheduler_sim.py [--quick] [--json] [--seeds N]``.
The last line of ``--json`` output is the summary JSON.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit_mcp.limits import Limit, ResolvedLimits, balanced_waves
from audit_mcp.pacing import run_outcome, with_observed
from audit_mcp.scheduler import Learned, PacketLoad, learn, physical_cap, schedule

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
TIERS = {  # requests/min, input tokens/min, output tokens/min
    "low": (50, 30_000, 8_000),
    "mid": (1_000, 450_000, 90_000),
    "high": (4_000, 2_000_000, 400_000),
}
CAPS = (3, 4, 6, 20)
PRIOR_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
MAX_TOKENS = 4_096
HOST_RETRIES = 10
MAX_RUNS = 12
HALF_LIFE = timedelta(hours=24)


@dataclass(frozen=True)
class Call:
    input_tokens: int
    output_tokens: int
    latency: float
    tool_after: float


@dataclass(frozen=True)
class Packet:
    packet_id: str
    text_tokens: int
    calls: tuple[Call, ...]

    @property
    def duration(self) -> float:
        return sum(c.latency + c.tool_after for c in self.calls)


def workload(rng: random.Random, n: int, budget: int, max_tokens: int, cached: bool) -> list[Packet]:
    """``n`` packets of roughly lognormal size; a run re-sends its growing context on every call.

    With ``cached`` (Anthropic prompt caching) only the new part of each call is charged to the input
    bucket; without it (OpenAI-style accounting) every input token is.
    """
    packets = []
    for i in range(n):
        size = int(min(budget, max(2_000, rng.lognormvariate(math.log(budget * 0.45), 0.5))))
        k = 6 + size // 4_000 + rng.randint(0, 4)
        calls = []
        context = 0
        for j in range(k):
            read = size * min(1.0, (j + 1) / max(1, k // 2))
            out = min(max_tokens, rng.randint(150, 700) if j < k - 1 else rng.randint(1_200, 2_500))
            full = int(4_000 + read + 250 * j)
            # Prompt caching: cache reads are not charged, only what is new since the last call (plus a little).
            charged = full if j == 0 or not cached else full - context + 300
            context = full
            calls.append(Call(charged, out, 1.0 + out / 70.0, rng.uniform(2.0, 10.0) if j < k - 1 else 0.0))
        packets.append(Packet(f"P{i:03d}", size, tuple(calls)))
    return packets


def lower_bound(packets: list[Packet], limits: tuple[int, int, int], cap: int, kind: str) -> float:
    """No schedule finishes sooner: the longest run, the slots, and each bucket's refill (minus its burst)."""
    rpm, itpm, otpm = limits
    durations = sorted((p.duration for p in packets), reverse=True)
    tau = min(p.calls[-1].latency for p in packets)
    total_in = sum(c.input_tokens for p in packets for c in p.calls)
    total_out = sum(c.output_tokens for p in packets for c in p.calls)
    total_calls = sum(len(p.calls) for p in packets)
    bounds = [durations[0], sum(durations) / cap,
              max(0.0, total_in - itpm) / (itpm / 60) + tau,
              max(0.0, total_out - otpm) / (otpm / 60) + tau,
              max(0.0, total_calls - rpm) / (rpm / 60) + tau]
    if kind == "whole_wave":
        bounds.append(sum(durations[k] for k in range(0, len(durations), cap)))
    return max(bounds)


class Provider:
    """Three continuous buckets; output reserved at ``max_tokens`` on admission."""

    def __init__(self, limits: tuple[int, int, int], max_tokens: int) -> None:
        self.max_tokens = max_tokens
        self.caps = [float(x) for x in limits]
        self.rates = [x / 60.0 for x in limits]
        self.levels = list(self.caps)
        self.at = 0.0

    def _refill(self, now: float) -> None:
        dt = now - self.at
        self.levels = [min(c, lv + r * dt) for c, lv, r in zip(self.caps, self.levels, self.rates, strict=True)]
        self.at = now

    def admit(self, now: float, input_tokens: int) -> float | None:
        """None when admitted, else the retry-after in seconds."""
        self._refill(now)
        need = [1.0, float(input_tokens), float(self.max_tokens)]
        short = [(n - lv) / r for n, lv, r in zip(need, self.levels, self.rates, strict=True) if n > lv]
        if short:
            return float(max(1, math.ceil(max(short))))
        self.levels = [lv - n for lv, n in zip(self.levels, need, strict=True)]
        return None

    def refund(self, now: float, unused: int) -> None:
        self._refill(now)
        self.levels[2] = min(self.caps[2], self.levels[2] + unused)

    def error_text(self, retry: float) -> str:
        names = ("requests", "input-tokens", "output-tokens")
        headers = ", ".join(f"anthropic-ratelimit-{n}-limit: {int(c)}" for n, c in zip(names, self.caps, strict=True))
        return f"API Error: 429 rate_limit_error, retry-after: {int(retry)}, {headers}"


@dataclass
class RunResult:
    finished: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    rate_limited: int = 0
    wasted_tokens: int = 0
    end: float = 0.0


def run_packets(
    provider: Provider, packets: list[Packet], width: int, kind: str, start: float,
    not_before: dict[str, float] | None = None,
) -> RunResult:
    """One run: ``width`` subagents at a time, rolling or in whole waves, each call retried by the host.

    A packet does not start before its ``not_before`` offset from ``start`` (the schedule's launch offsets).
    """
    out = RunResult(end=start)
    queue = list(packets)
    events: list[tuple[float, int, str, Packet, int, int, float]] = []
    seq = itertools.count()
    active = 0
    wave_left = 0
    began: dict[str, float] = {}
    spent: dict[str, int] = {}
    offsets = not_before or {}

    def launch(now: float) -> None:
        nonlocal active, wave_left
        if kind == "whole_wave" and wave_left:
            return
        while queue and active < width:
            packet = queue.pop(0)
            at = max(now, start + offsets.get(packet.packet_id, 0.0))
            active += 1
            wave_left += 1
            began[packet.packet_id] = at
            spent[packet.packet_id] = 0
            heapq.heappush(events, (at, next(seq), "call", packet, 0, 0, 0.0))

    launch(start)
    while events:
        now, _, what, packet, j, tries, _ = heapq.heappop(events)
        call = packet.calls[j]
        if what == "call":
            out.calls += 1
            retry = provider.admit(now, call.input_tokens)
            if retry is None:
                spent[packet.packet_id] += call.input_tokens
                heapq.heappush(events, (now + call.latency, next(seq), "done", packet, j, 0, 0.0))
                continue
            out.rate_limited += 1
            if tries >= HOST_RETRIES:
                out.failed[packet.packet_id] = provider.error_text(retry)
                out.wasted_tokens += spent[packet.packet_id]
                active -= 1
                wave_left -= 1
                out.end = max(out.end, now)
                launch(now)
                continue
            wait = retry if retry <= 60 else min(60.0, 2.0 ** tries)
            heapq.heappush(events, (now + wait, next(seq), "call", packet, j, tries + 1, 0.0))
        else:
            provider.refund(now, provider.max_tokens - call.output_tokens)
            if j + 1 < len(packet.calls):
                heapq.heappush(events, (now + call.tool_after, next(seq), "call", packet, j + 1, 0, 0.0))
                continue
            out.finished[packet.packet_id] = now - began[packet.packet_id]
            active -= 1
            wave_left -= 1
            out.end = max(out.end, now)
            launch(now)
    return out


def _limits(values: tuple[int, int, int], confidence: str, accounting: str) -> ResolvedLimits:
    keys = ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute")
    limits = {k: Limit(int(v), "simulated", confidence) for k, v in zip(keys, values, strict=True)}
    limits["context_tokens"] = Limit(200_000, "simulated", confidence)
    limits["output_tokens"] = Limit(min(MAX_TOKENS, values[2] // 4), "simulated", confidence)
    # Anthropic does not charge cache reads; an OpenAI-style provider charges every input token.
    return ResolvedLimits("anthropic" if accounting == "cached" else "openai", "sim-model", limits)


def _true_profile(packets: list[Packet]) -> Learned:
    n = len(packets)
    return Learned(run_seconds=sum(p.duration for p in packets) / n,
                   input_ratio=sum(sum(c.input_tokens for c in p.calls) / p.text_tokens for p in packets) / n,
                   output_tokens=sum(sum(c.output_tokens for c in p.calls) for p in packets) / n,
                   calls=sum(len(p.calls) for p in packets) / n)


@dataclass
class Scenario:
    tier: str
    cap: int
    kind: str
    prior: float
    accounting: str
    seed: int
    n_packets: int


@dataclass
class Outcome:
    makespan: float
    lower_bound: float
    calls: int
    rate_limited: int
    failed_packets: int
    wasted_tokens: int
    lone_run_outruns: bool = False  # one subagent alone draws input faster than the bucket refills


def lone_run_outruns(packets: list[Packet], itpm: int) -> bool:
    """Whether a typical run, alone, draws input tokens faster than the bucket refills.

    Then 429s come from each subagent's own pace, which no width, order or launch pacing changes.
    """
    draw = sum(sum(c.input_tokens for c in p.calls) / p.duration for p in packets) / len(packets)
    return draw > itpm / 60


def _packets(sc: Scenario, seed: int) -> tuple[list[Packet], int]:
    truth = TIERS[sc.tier]
    max_tokens = min(MAX_TOKENS, truth[2] // 4)  # a host keeps max_tokens well inside the output bucket
    # The packer keeps a packet's first call inside the input bucket, as the server does.
    packets = workload(random.Random(seed), sc.n_packets, budget=min(40_000, int(truth[1] * 0.6)),
                       max_tokens=max_tokens, cached=sc.accounting == "cached")
    return packets, max_tokens


def simulate(sc: Scenario, strategy: str, *, warm: bool = False) -> Outcome:
    """One audit of the scenario's packets; ``warm`` lets the scheduler keep what an earlier audit taught it."""
    truth = TIERS[sc.tier]
    packets, max_tokens = _packets(sc, sc.seed)
    prior = tuple(max(1, int(v * sc.prior)) for v in truth)
    learned = _true_profile(packets) if strategy == "oracle" else Learned()
    limits = _limits(truth if strategy == "oracle" else prior, "high" if strategy == "oracle" else "medium",
                     sc.accounting)
    t0 = EPOCH
    if warm and strategy == "scheduler":
        earlier, _ = _packets(sc, sc.seed + 1)
        _, learned, ended = _audit(sc, strategy, earlier, Provider(truth, max_tokens), limits, learned, EPOCH)
        t0 = ended + timedelta(hours=6)
    outcome, _, _ = _audit(sc, strategy, packets, Provider(truth, max_tokens), limits, learned, t0)
    return outcome


def _audit(
    sc: Scenario, strategy: str, packets: list[Packet], provider: Provider, limits: ResolvedLimits,
    learned: Learned, t0: datetime,
) -> tuple[Outcome, Learned, datetime]:
    pending = list(packets)
    clock = 0.0
    total = RunResult()
    for _ in range(MAX_RUNS):
        if not pending:
            break
        now = t0 + timedelta(seconds=clock)
        if strategy == "naive":
            # The fixed placeholder this scheduler replaced: the host's cap, in balanced waves.
            width, start, not_before = balanced_waves(len(pending), sc.cap)[0], clock, {}
        else:
            seen = with_observed(limits, learned)
            plan = schedule(seen, learned, sc.cap, sc.kind, [PacketLoad(p.packet_id, p.text_tokens) for p in pending],
                            now, half_life=HALF_LIFE)
            width = plan.wave_size
            not_before = dict(zip(plan.order, plan.launch_offsets, strict=True))
            wait = (plan.cooldown_until - now).total_seconds() if plan.cooldown_until else 0.0
            start = clock + max(0.0, wait)
            order = {pid: i for i, pid in enumerate(plan.order)}
            pending.sort(key=lambda p: order[p.packet_id])
        result = run_packets(provider, pending, width, sc.kind, start, not_before)
        total.calls += result.calls
        total.rate_limited += result.rate_limited
        total.wasted_tokens += result.wasted_tokens
        clock = result.end
        if strategy == "scheduler":
            done = [p for p in pending if p.packet_id in result.finished]
            usage = [({"input_tokens": sum(c.input_tokens for c in p.calls),
                       "output_tokens": sum(c.output_tokens for c in p.calls), "api_calls": len(p.calls),
                       "seconds": result.finished[p.packet_id]}, p.text_tokens) for p in done]
            at = t0 + timedelta(seconds=clock)
            taught = run_outcome(launched=len(pending), wave_size=width, succeeded=len(done),
                                 reported=result.failed, usage=usage, now=at)
            c_phys, _ = physical_cap(with_observed(limits, learned), sc.cap,
                                     sum(p.text_tokens for p in pending) / len(pending), learned)
            learned = learn(learned, taught, at, c_phys, HALF_LIFE)
        total.failed.update(result.failed)
        pending = [p for p in pending if p.packet_id in result.failed]
    outcome = Outcome(clock, lower_bound(packets, TIERS[sc.tier], sc.cap, sc.kind), total.calls,
                      total.rate_limited, len(total.failed), total.wasted_tokens,
                      lone_run_outruns(packets, TIERS[sc.tier][1]))
    return outcome, learned, t0 + timedelta(seconds=clock)


def scenarios(quick: bool, seeds: int) -> list[Scenario]:
    out = []
    shapes = itertools.product(TIERS, CAPS, ("rolling", "whole_wave"), PRIOR_FACTORS, ("cached", "uncached"))
    for tier, cap, kind, prior, accounting in shapes:
        for seed in range(seeds):
            n = 24 if quick else 60
            out.append(Scenario(tier, cap, kind, prior, accounting, seed * 7919 + cap, n))
    return out


def summarise(rows: list[tuple[Scenario, Outcome]]) -> dict[str, float | int]:
    ratios = sorted(o.makespan / o.lower_bound for _, o in rows)
    calls = sum(o.calls for _, o in rows)
    limited = sum(o.rate_limited for _, o in rows)
    fits = [o for _, o in rows if not o.lone_run_outruns]
    fits_calls = sum(o.calls for o in fits)
    return {
        "makespan_over_lb_median": round(statistics.median(ratios), 3),
        "makespan_over_lb_p90": round(ratios[min(len(ratios) - 1, int(0.9 * len(ratios)))], 3),
        "rate_limited_calls": limited,
        "rate_limited_share": round(limited / calls, 4) if calls else 0.0,
        "calls": calls,
        # The same share over the scenarios where one subagent alone stays within the input bucket.
        "rate_limited_share_lone_run_fits": round(sum(o.rate_limited for o in fits) / fits_calls, 4)
        if fits_calls else 0.0,
        "failed_packets": sum(o.failed_packets for _, o in rows),
        "wasted_tokens": sum(o.wasted_tokens for _, o in rows),
        "scenarios": len(rows),
    }


def _group(sc: Scenario, by: str) -> tuple[str, ...]:
    return (f"{sc.prior:g}×",) if by == "prior" else (sc.tier, sc.accounting)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller scenarios (under a minute)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    parser.add_argument("--table", action="store_true", help="with --json, print the table too")
    parser.add_argument("--by", choices=("tier", "prior"), default="tier", help="how the table groups scenarios")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per scenario shape")
    args = parser.parse_args(argv)
    seeds = args.seeds or (3 if args.quick else 10)
    started = time.monotonic()
    results: dict[str, list[tuple[Scenario, Outcome]]] = {"scheduler": [], "naive": [], "oracle": [],
                                                           "scheduler_cold": []}
    for sc in scenarios(args.quick, seeds):
        for strategy, rows in results.items():
            cold = strategy == "scheduler_cold"
            rows.append((sc, simulate(sc, "scheduler" if cold else strategy, warm=strategy == "scheduler")))
    summary = {name: summarise(rows) for name, rows in results.items()}
    if not args.json or args.table:
        groups: list[tuple[str, ...]] = (
            [(f"{p:g}×",) for p in PRIOR_FACTORS] if args.by == "prior"
            else [(t, a) for t, a in itertools.product(TIERS, ("cached", "uncached"))])
        heads = ["limit prior"] if args.by == "prior" else ["tier", "accounting"]
        print("| " + " | ".join(heads) + " | strategy | makespan/LB median | p90 | 429s / calls | failed packets |"
              " tokens wasted |")
        print("|" + "---|" * (len(heads) + 6))
        for group in groups:
            for name, rows in results.items():
                part = summarise([r for r in rows if _group(r[0], args.by) == group])
                print(f"| {' | '.join(group)} | {name} | {part['makespan_over_lb_median']:.2f} | "
                      f"{part['makespan_over_lb_p90']:.2f} | {part['rate_limited_share']:.1%} | "
                      f"{part['failed_packets']} | {part['wasted_tokens']:,} |")
        print(f"{len(results['scheduler'])} scenarios in {time.monotonic() - started:.1f}s")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
