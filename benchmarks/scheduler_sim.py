"""A discrete-event simulation of an audit against a rate-limited provider, to measure the wave scheduler.

The fake provider has three continuously refilling token buckets (requests,
input tokens, output tokens; the output bucket is charged ``max_tokens`` at
admission and refunded the unused part at completion) and answers a call that
does not fit with a 429, a ``retry-after`` and the API's message naming the
limit it would exceed. A subagent is a sequence of calls with tool time
between them; the host retries a throttled call up to ten times (honouring
``retry-after``), then the packet fails and is requeued into the next run.
Each finished packet's ``usage`` reports its tokens, calls, seconds and
rate-limited calls. Hosts have a cap C and are rolling (a slot refills as
soon as it frees) or whole-wave (a wave waits for its slowest member); both
start no packet before the schedule's launch offset for it (seconds after the
run begins).

Every strategy reviews the same code (a scenario's list of file sizes, drawn
from its seed) and packs it, before each run, with the packet budget it would
use itself: ``scheduler`` (the real ``audit_mcp.scheduling.scheduler`` with limit priors
that are wrong by ¼–4×, told as the built-in table's guess or as the session
config (``--priors``), learning from the failures' texts and the usage blocks
between runs) with ``packet_token_budget`` from the limits it was told and
what it has learned, exactly as the server dispatches; ``oracle`` (the same
formulas fed the true limits and run profile) with that budget from the
truth; ``naive`` (the host's cap C in balanced waves: the fixed width this
scheduler replaced) with the server's default budget, kept only as small as
the true input bucket admits at all (see ``naive_budget``). A failed packet's
files are packed again into the next run. Each makespan is bounded below by
``lower_bound`` over the packets that strategy completed; a scenario's
strategies are compared against the smallest of the bounds of those that
reviewed all the code, so a strategy that packs smaller and pays more
per-call overhead is not flattered by its own larger bound. Besides 429s over
all calls, the summary gives the same share over the scenarios where one
subagent alone, on the default packing, stays inside the input bucket
(``rate_limited_share_lone_run_fits``), and each strategy's makespan against
naive's where naive met a 429.

Usage: ``python benchmarks/scheduler_sim.py [--quick] [--json] [--table] [--by tier|kind|prior]
[--priors table|config] [--without NAME ...] [--seeds N]``. The last line of ``--json`` output is the
summary JSON.
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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit_mcp.core.config import SessionConfig
from audit_mcp.scheduling import budget as budget_module
from audit_mcp.scheduling import profile as profile_module
from audit_mcp.scheduling import scheduler as scheduler_module
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.scheduling.learning import learn
from audit_mcp.scheduling.limits import Limit, ResolvedLimits, balanced_waves
from audit_mcp.scheduling.pacing import run_outcome, with_observed
from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.scheduler import PacketLoad, physical_cap, schedule

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
MAX_RUNS = SessionConfig().max_runs  # the server gives up on an audit after this many runs
HALF_LIFE = timedelta(hours=24)
CONTEXT_TOKENS = 200_000
MAX_PACKET_TOKENS = SessionConfig().max_packet_tokens  # the server's default cap on a packet
CODE_TOKENS_PER_SLOT = 20_000  # a scenario reviews n × this many tokens of code
SYSTEM_PROMPT = 4_000  # every call re-sends the system prompt and tools
REPORT_THROTTLED_CALLS = True  # each packet's usage says how many of its calls were rate-limited (--without)
ABLATIONS = {  # what ``--without NAME`` switches off, to measure what each part of the scheduler is worth
    "throttled_calls": "usage does not report the rate-limited calls the host's retries absorbed",
    "whole_wave_peak": "whole waves are sized to the mean input draw, not its peak",
    "uncached_cap": "uncached packets are not kept to 20k tokens",
    "wave_offsets": "a whole-wave host gets an earliest start per packet, not per wave",
    "full_width": "the width sustains the limits at 85%, not at full use",
}


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
    files: tuple[tuple[str, int], ...] = ()  # (file id, tokens) it reviews

    @property
    def duration(self) -> float:
        return sum(c.latency + c.tool_after for c in self.calls)


def make_packet(rng: random.Random, packet_id: str, size: int, max_tokens: int, cached: bool) -> Packet:
    """One subagent's calls over ``size`` tokens of code; it re-sends its growing context on every call.

    With ``cached`` (Anthropic prompt caching) only the new part of each call is charged to the input
    bucket; without it (OpenAI-style accounting) every input token is.
    """
    k = 6 + size // 4_000 + rng.randint(0, 4)
    calls = []
    context = 0
    for j in range(k):
        read = size * min(1.0, (j + 1) / max(1, k // 2))
        out = min(max_tokens, rng.randint(150, 700) if j < k - 1 else rng.randint(1_200, 2_500))
        full = int(SYSTEM_PROMPT + read + 250 * j)
        # Prompt caching: cache reads are not charged, only what is new since the last call (plus a little).
        charged = full if j == 0 or not cached else full - context + 300
        context = full
        calls.append(Call(charged, out, 1.0 + out / 70.0, rng.uniform(2.0, 10.0) if j < k - 1 else 0.0))
    return Packet(packet_id, size, tuple(calls))


def workload(rng: random.Random, n: int, budget: int, max_tokens: int, cached: bool) -> list[Packet]:
    """``n`` packets of roughly lognormal size up to ``budget``."""
    sizes = [int(min(budget, max(2_000, rng.lognormvariate(math.log(budget * 0.45), 0.5)))) for _ in range(n)]
    return [make_packet(rng, f"P{i:03d}", size, max_tokens, cached) for i, size in enumerate(sizes)]


def code(rng: random.Random, total: int) -> list[tuple[str, int]]:
    """Files of lognormal size (median 2.5k tokens) adding up to about ``total`` tokens, as (id, tokens)."""
    files: list[tuple[str, int]] = []
    while sum(t for _, t in files) < total:
        files.append((f"f{len(files)}", int(min(30_000, max(200, rng.lognormvariate(math.log(2_500), 1.0))))))
    return files


def pack(files: list[tuple[str, int]], budget: int) -> list[list[tuple[str, int]]]:
    """Files in order into packets of at most ``budget`` tokens; a larger file is cut into pieces first."""
    pieces = []
    for fid, tokens in files:
        parts = math.ceil(tokens / budget)
        pieces += [(fid if parts == 1 else f"{fid}.{i}", tokens // parts) for i in range(parts)]
    packets: list[list[tuple[str, int]]] = []
    size = budget
    for piece in pieces:
        if size + piece[1] > budget:
            packets.append([])
            size = 0
        packets[-1].append(piece)
        size += piece[1]
    return packets


def lower_bound(packets: list[Packet], limits: tuple[int, int, int], cap: int, kind: str) -> float:
    """No schedule finishes sooner: the longest run, the slots, and each bucket's refill (minus its burst)."""
    rpm, itpm, otpm = limits
    durations = sorted((p.duration for p in packets), reverse=True)
    tau = min(p.calls[-1].latency for p in packets)
    total_in = sum(c.input_tokens for p in packets for c in p.calls)
    total_out = sum(c.output_tokens for p in packets for c in p.calls)
    total_calls = sum(len(p.calls) for p in packets)
    bounds = [
        durations[0],
        sum(durations) / cap,
        max(0.0, total_in - itpm) / (itpm / 60) + tau,
        max(0.0, total_out - otpm) / (otpm / 60) + tau,
        max(0.0, total_calls - rpm) / (rpm / 60) + tau,
    ]
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
        self.short = 1  # the bucket that refused the last call (0 requests, 1 input, 2 output)

    def _refill(self, now: float) -> None:
        dt = now - self.at
        self.levels = [min(c, lv + r * dt) for c, lv, r in zip(self.caps, self.levels, self.rates, strict=True)]
        self.at = now

    def admit(self, now: float, input_tokens: int) -> float | None:
        """None when admitted, else the retry-after in seconds."""
        self._refill(now)
        need = [1.0, float(input_tokens), float(self.max_tokens)]
        short = [
            ((n - lv) / r, i) for i, (n, lv, r) in enumerate(zip(need, self.levels, self.rates, strict=True)) if n > lv
        ]
        if short:
            wait, self.short = max(short)
            return float(max(1, math.ceil(wait)))
        self.levels = [lv - n for lv, n in zip(self.levels, need, strict=True)]
        return None

    def refund(self, now: float, unused: int) -> None:
        self._refill(now)
        self.levels[2] = min(self.caps[2], self.levels[2] + unused)

    def error_text(self, retry: float) -> str:
        """What a host shows for a packet that failed throttled: the API's message, which names the one limit
        the refused call would have exceeded (not the response headers), and the wait."""
        unit = ("requests", "input tokens", "output tokens")[self.short]
        message = (
            f"This request would exceed the rate limit for your organization of {int(self.caps[self.short]):,} "
            f"{unit} per minute."
        )
        body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": message}})
        return f"API Error: 429 {body} retry-after: {int(retry)}"


@dataclass
class RunResult:
    finished: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    throttled: dict[str, int] = field(default_factory=dict)  # rate-limited calls per packet, retries included
    calls: int = 0
    rate_limited: int = 0
    wasted_tokens: int = 0
    end: float = 0.0


def run_packets(
    provider: Provider,
    packets: list[Packet],
    width: int,
    kind: str,
    start: float,
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
            out.throttled[packet.packet_id] = out.throttled.get(packet.packet_id, 0) + 1
            if tries >= HOST_RETRIES:
                out.failed[packet.packet_id] = provider.error_text(retry)
                out.wasted_tokens += spent[packet.packet_id]
                active -= 1
                wave_left -= 1
                out.end = max(out.end, now)
                launch(now)
                continue
            wait = retry if retry <= 60 else min(60.0, 2.0**tries)
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
    limits["context_tokens"] = Limit(CONTEXT_TOKENS, "simulated", confidence)
    limits["output_tokens"] = Limit(min(MAX_TOKENS, values[2] // 4), "simulated", confidence)
    # Anthropic does not charge cache reads; an OpenAI-style provider charges every input token.
    return ResolvedLimits("anthropic" if accounting == "cached" else "openai", "sim-model", limits)


def _true_profile(packets: list[Packet]) -> Learned:
    n = len(packets)
    return Learned(
        run_seconds=sum(p.duration for p in packets) / n,
        input_ratio=sum(sum(c.input_tokens for c in p.calls) / p.text_tokens for p in packets) / n,
        output_tokens=sum(sum(c.output_tokens for c in p.calls) for p in packets) / n,
        calls=sum(len(p.calls) for p in packets) / n,
    )


@dataclass
class Scenario:
    tier: str
    cap: int
    kind: str
    prior: float
    accounting: str
    seed: int
    code_tokens: int  # how much code the audit reviews, however it is packed
    # Where the scheduler's wrong limits come from: the built-in tier table (low confidence: a guess, which
    # does not bind) or the session config (medium: what the user said, which does).
    told: str = "table"


@dataclass
class Outcome:
    makespan: float
    lower_bound: float  # over the packets this strategy completed
    calls: int
    rate_limited: int
    failed_packets: int
    wasted_tokens: int
    packets: int = 0  # packets completed
    unfinished_files: int = 0  # files still unreviewed after MAX_RUNS runs
    lone_run_outruns: bool = False  # one subagent alone (default packing) draws input faster than it refills
    reference_bound: float = 0.0  # the scenario's smallest lower bound over the compared strategies

    @property
    def ratio(self) -> float:
        return self.makespan / (self.reference_bound or self.lower_bound)


def lone_run_outruns(packets: list[Packet], itpm: int) -> bool:
    """Whether a typical run, alone, draws input tokens faster than the bucket refills.

    Then 429s come from each subagent's own pace, which no width, order or launch pacing changes.
    """
    draw = sum(sum(c.input_tokens for c in p.calls) / p.duration for p in packets) / len(packets)
    return draw > itpm / 60


def packets_of(sc: Scenario, files: list[tuple[str, int]], budget: int, max_tokens: int, run: int) -> list[Packet]:
    """The scenario's packets over ``files``; a packet's calls depend only on the seed and its contents."""
    out = []
    for group in pack(files, budget):
        size = sum(t for _, t in group)
        rng = random.Random(f"{sc.seed}:{group[0][0]}:{len(group)}:{size}")
        packet = make_packet(rng, f"R{run}-{group[0][0]}+{len(group)}", size, max_tokens, sc.accounting == "cached")
        out.append(replace(packet, files=tuple(group)))
    return out


def naive_budget(sc: Scenario) -> int:
    """The server's default budget with no limit known: the configured cap and the context window.

    Also kept to the largest packet whose every call the true input bucket admits (60% of it, as all
    strategies had before they packed for themselves): without it a 40k-token packet on the low tier,
    re-sending over 30k tokens per call, would never be admitted and the audit never finish.
    """
    truth = TIERS[sc.tier]
    return min(MAX_PACKET_TOKENS, _limits(truth, "low", sc.accounting).packet_budget, int(truth[1] * 0.6))


def _budget(
    sc: Scenario, strategy: str, files: list[tuple[str, int]], limits: ResolvedLimits, learned: Learned, max_tokens: int
) -> int:
    """The packet budget each strategy packs with: the server's, from what it was told and has learned."""
    if strategy == "naive":
        return naive_budget(sc)
    if strategy == "oracle":
        # The run profile depends on the packing: two rounds from the default packing settle it.
        budget = naive_budget(sc)
        for _ in range(2):
            budget = packet_token_budget(
                limits, _true_profile(packets_of(sc, files, budget, max_tokens, 0)), MAX_PACKET_TOKENS, sc.cap
            )
        return budget
    return packet_token_budget(with_observed(limits, learned), learned, MAX_PACKET_TOKENS, sc.cap)


def simulate(sc: Scenario, strategy: str, *, warm: bool = False) -> Outcome:
    """One audit of the scenario's code; ``warm`` lets the scheduler keep what an earlier audit taught it."""
    truth = TIERS[sc.tier]
    max_tokens = min(MAX_TOKENS, truth[2] // 4)  # a host keeps max_tokens well inside the output bucket
    files = code(random.Random(sc.seed), sc.code_tokens)
    prior = tuple(max(1, int(v * sc.prior)) for v in truth)
    confidence = "high" if strategy == "oracle" else {"table": "low", "config": "medium"}[sc.told]
    limits = _limits(truth if strategy == "oracle" else prior, confidence, sc.accounting)
    learned, t0 = Learned(), EPOCH
    if warm and strategy == "scheduler":
        earlier = code(random.Random(sc.seed + 1), sc.code_tokens)
        _, learned, ended = _audit(sc, strategy, earlier, Provider(truth, max_tokens), limits, learned, EPOCH)
        t0 = ended + timedelta(hours=6)
    outcome, _, _ = _audit(sc, strategy, files, Provider(truth, max_tokens), limits, learned, t0)
    outcome.lone_run_outruns = lone_run_outruns(packets_of(sc, files, naive_budget(sc), max_tokens, 0), truth[1])
    return outcome


def _usage(packet: Packet, result: RunResult) -> dict[str, float]:
    """The ``usage`` block a finished packet's subagent sends with its submission."""
    usage = {
        "input_tokens": float(sum(c.input_tokens for c in packet.calls)),
        "output_tokens": float(sum(c.output_tokens for c in packet.calls)),
        "api_calls": float(len(packet.calls)),
        "seconds": result.finished[packet.packet_id],
    }
    if REPORT_THROTTLED_CALLS:
        usage["rate_limited_calls"] = float(result.throttled.get(packet.packet_id, 0))
    return usage


def _audit(
    sc: Scenario,
    strategy: str,
    files: list[tuple[str, int]],
    provider: Provider,
    limits: ResolvedLimits,
    learned: Learned,
    t0: datetime,
) -> tuple[Outcome, Learned, datetime]:
    pending = list(files)
    clock = 0.0
    total = RunResult()
    completed: list[Packet] = []
    for run in range(MAX_RUNS):
        if not pending:
            break
        now = t0 + timedelta(seconds=clock)
        packets = packets_of(
            sc, pending, _budget(sc, strategy, pending, limits, learned, provider.max_tokens), provider.max_tokens, run
        )
        launch = list(packets)
        if strategy == "oracle":
            learned = _true_profile(packets)
        if strategy == "naive":
            # The fixed placeholder this scheduler replaced: the host's cap, in balanced waves.
            width, start, not_before = balanced_waves(len(packets), sc.cap)[0], clock, {}
        else:
            seen = with_observed(limits, learned)
            plan = schedule(
                seen,
                learned,
                sc.cap,
                sc.kind,
                [PacketLoad(p.packet_id, p.text_tokens) for p in packets],
                now,
                half_life=HALF_LIFE,
            )
            width = plan.wave_size
            not_before = dict(zip(plan.order, plan.launch_offsets, strict=True))
            wait = (plan.cooldown_until - now).total_seconds() if plan.cooldown_until else 0.0
            start = clock + max(0.0, wait)
            order = {pid: i for i, pid in enumerate(plan.order)}
            launch.sort(key=lambda p: order[p.packet_id])
        result = run_packets(provider, launch, width, sc.kind, start, not_before)
        total.calls += result.calls
        total.rate_limited += result.rate_limited
        total.wasted_tokens += result.wasted_tokens
        clock = result.end
        done = [p for p in packets if p.packet_id in result.finished]
        if strategy == "scheduler":
            usage = [(_usage(p, result), p.text_tokens) for p in done]
            at = t0 + timedelta(seconds=clock)
            taught = run_outcome(
                launched=len(packets), wave_size=width, succeeded=len(done), reported=result.failed, usage=usage, now=at
            )
            c_phys, _ = physical_cap(
                with_observed(limits, learned), sc.cap, sum(p.text_tokens for p in packets) / len(packets), learned
            )
            learned = learn(learned, taught, at, c_phys, HALF_LIFE)
        total.failed.update({f"{run}:{k}": v for k, v in result.failed.items()})
        completed += done
        # A failed packet's files go back into the queue, to be packed again for the next run.
        pending = [f for p in packets if p.packet_id in result.failed for f in p.files]
    bound = lower_bound(completed, TIERS[sc.tier], sc.cap, sc.kind) if completed else 0.0
    outcome = Outcome(
        clock,
        bound,
        total.calls,
        total.rate_limited,
        len(total.failed),
        total.wasted_tokens,
        packets=len(completed),
        unfinished_files=len(pending),
    )
    return outcome, learned, t0 + timedelta(seconds=clock)


def scenarios(quick: bool, seeds: int, told: str = "table") -> list[Scenario]:
    out = []
    shapes = itertools.product(TIERS, CAPS, ("rolling", "whole_wave"), PRIOR_FACTORS, ("cached", "uncached"))
    for tier, cap, kind, prior, accounting in shapes:
        for seed in range(seeds):
            n = 24 if quick else 60
            out.append(Scenario(tier, cap, kind, prior, accounting, seed * 7919 + cap, n * CODE_TOKENS_PER_SLOT, told))
    return out


def summarise(rows: list[tuple[Scenario, Outcome]]) -> dict[str, float | int]:
    ratios = sorted(o.ratio for _, o in rows)
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
        if fits_calls
        else 0.0,
        "failed_packets": sum(o.failed_packets for _, o in rows),
        "packets": sum(o.packets for _, o in rows),
        "unfinished_files": sum(o.unfinished_files for _, o in rows),
        "wasted_tokens": sum(o.wasted_tokens for _, o in rows),
        "scenarios": len(rows),
    }


def against_naive(rows: list[tuple[Scenario, Outcome]], naive: list[tuple[Scenario, Outcome]]) -> dict[str, float]:
    """Makespan against the naive baseline's over the scenarios where limits bind (naive saw a 429)."""
    pairs = [(o.makespan, n.makespan) for (_, o), (_, n) in zip(rows, naive, strict=True) if n.rate_limited]
    if not pairs:
        return {}
    return {
        "binding_scenarios": len(pairs),
        "makespan_over_naive_where_limits_bind_median": round(statistics.median(a / b for a, b in pairs), 3),
        "no_slower_than_naive_where_limits_bind": round(sum(a <= b for a, b in pairs) / len(pairs), 3),
    }


def _group(sc: Scenario, by: str) -> tuple[str, ...]:
    if by == "prior":
        return (f"{sc.prior:g}×",)
    return (sc.tier, sc.accounting, sc.kind) if by == "kind" else (sc.tier, sc.accounting)


def ablate(names: list[str]) -> None:
    """Switch off the named parts of the scheduler for this process (see ``ABLATIONS``)."""
    global REPORT_THROTTLED_CALLS
    if "throttled_calls" in names:
        REPORT_THROTTLED_CALLS = False
    if "whole_wave_peak" in names:
        scheduler_module.WHOLE_WAVE_INPUT_PEAK = 1.0
    if "uncached_cap" in names:
        budget_module.UNCACHED_PACKET_TOKENS = 10**9
    if "wave_offsets" in names:
        scheduler_module._by_wave = lambda offsets, waves: offsets
    if "full_width" in names:
        profile_module.TARGET_UTILISATION = 0.85


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller scenarios (under a minute)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    parser.add_argument("--table", action="store_true", help="with --json, print the table too")
    parser.add_argument(
        "--by",
        choices=("tier", "kind", "prior"),
        default="tier",
        help="how the table groups scenarios (kind: tier, accounting and host kind)",
    )
    parser.add_argument(
        "--priors",
        choices=("table", "config"),
        default="table",
        help="where the wrong limits come from: the built-in table (low confidence) or the session config (medium)",
    )
    parser.add_argument("--seeds", type=int, default=None, help="seeds per scenario shape")
    parser.add_argument(
        "--without",
        action="append",
        choices=sorted(ABLATIONS),
        default=[],
        help="switch a part of the scheduler off (repeatable): "
        + "; ".join(f"{k}: {v}" for k, v in ABLATIONS.items()).replace("%", "%%"),
    )
    args = parser.parse_args(argv)
    ablate(args.without)
    seeds = args.seeds or (3 if args.quick else 10)
    started = time.monotonic()
    results: dict[str, list[tuple[Scenario, Outcome]]] = {
        "scheduler": [],
        "naive": [],
        "oracle": [],
        "scheduler_cold": [],
    }
    for sc in scenarios(args.quick, seeds, args.priors):
        outcomes = {
            strategy: simulate(
                sc, "scheduler" if strategy == "scheduler_cold" else strategy, warm=strategy == "scheduler"
            )
            for strategy in results
        }
        # The same code packed differently has different bounds: compare every strategy against the smallest
        # of those that reviewed all of it (one that gave up completed fewer packets, hence a smaller bound).
        reference = min((o.lower_bound for o in outcomes.values() if not o.unfinished_files), default=0.0)
        for strategy, outcome in outcomes.items():
            outcome.reference_bound = reference
            results[strategy].append((sc, outcome))
    summary = {name: summarise(rows) for name, rows in results.items()}
    for name in ("scheduler", "oracle", "scheduler_cold"):
        summary[name].update(against_naive(results[name], results["naive"]))
    if not args.json or args.table:
        groups: list[tuple[str, ...]] = (
            [(f"{p:g}×",) for p in PRIOR_FACTORS]
            if args.by == "prior"
            else list(itertools.product(TIERS, ("cached", "uncached"), ("rolling", "whole_wave")))
            if args.by == "kind"
            else list(itertools.product(TIERS, ("cached", "uncached")))
        )
        heads = (
            ["limit prior"]
            if args.by == "prior"
            else ["tier", "accounting", "host"]
            if args.by == "kind"
            else ["tier", "accounting"]
        )
        print(
            "| " + " | ".join(heads) + " | strategy | makespan/LB median | p90 | makespan / naive's, median |"
            " 429s / calls | failed packets | tokens wasted |"
        )
        print("|" + "---|" * (len(heads) + 7))
        for group in groups:
            for name, rows in results.items():
                picked = [i for i, r in enumerate(rows) if _group(r[0], args.by) == group]
                part = summarise([rows[i] for i in picked])
                versus = statistics.median(rows[i][1].makespan / results["naive"][i][1].makespan for i in picked)
                print(
                    f"| {' | '.join(group)} | {name} | {part['makespan_over_lb_median']:.2f} | "
                    f"{part['makespan_over_lb_p90']:.2f} | {versus:.2f} | {part['rate_limited_share']:.1%} | "
                    f"{part['failed_packets']} | {part['wasted_tokens']:,} |"
                )
        print(f"{len(results['scheduler'])} scenarios in {time.monotonic() - started:.1f}s")
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
