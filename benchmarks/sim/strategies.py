"""The strategies the benchmark compares, each running a whole audit of a scenario's code.

Every strategy reviews the same code and packs what is left, before each run, with the packet budget it
would use itself; a run holds at most the server's ``max_packets_per_run`` packets, and a file whose packet
failed ``max_attempts`` times is given up (its cells end ``failed``), as the server does. A packet's calls
depend only on the seed and its contents, so equal packings give equal packets.

- ``scheduler``: ``audit_mcp.scheduling`` as the server runs it, told the limits as the scenario says
  (``known``: the true ones, as a probe or the 429 messages give them; ``unknown``: nothing configured, the
  built-in table; ``half`` and ``double``: the session config says half or twice the truth), learning
  from the usage blocks and failures as the server does.
- ``oracle``: the scheduler's formulas fed the true limits and the true run profile of the packets.
- ``naive``: the host's cap (at most 16), dispatched the host's own way, with the server's default
  budget without rate-limit knowledge (kept within what the true input bucket admits at all, so that it
  finishes: see ``naive_budget``), in packing order.
- ``fixed(w)``: a fixed width ``w``, the host's own way, longest packets first, packed as the oracle packs;
  ``best_fixed`` is the best of them for the scenario, chosen in hindsight. ``best_fixed_ceiling`` is the
  same search for an operator who must also obey the limits the scenario configures (``half``): its
  provider refuses what exceeds the lower of the true and the configured limits, and it packs for those.
  Everywhere else no configured limit is below the truth, and it is ``best_fixed``. ``best_fixed_polite``
  is the same search among the widths whose calls meet at most ``POLITE_SHARE`` of 429s (the target the
  scheduler is held to); where ``best_fixed`` keeps to it, it is ``best_fixed``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from audit_mcp.core.config import ModelConfig, SessionConfig
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.scheduling.learning import Context, learn_failure, learn_run, learn_usage
from audit_mcp.scheduling.limits import Limit, ResolvedLimits, resolve_limits
from audit_mcp.scheduling.live import replan
from audit_mcp.scheduling.pacing import run_outcome, with_observed
from audit_mcp.scheduling.profile import FIT_KEYS, Learned
from audit_mcp.scheduling.scheduler import PacketLoad, Schedule, schedule
from audit_mcp.scheduling.sizefit import Fit, folded
from benchmarks.sim.host import Controller, Fixed, Orders, RunResult, run_packets, usage_of
from benchmarks.sim.world import MAX_TOKENS, TIERS, Call, Packet, Provider, code, lone_run_outruns, lower_bound, pack
from benchmarks.sim.world import make_packet as _make_packet

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG = SessionConfig()
MAX_RUNS = CONFIG.max_runs  # the server gives up on an audit after this many runs
MAX_ATTEMPTS = CONFIG.max_attempts  # ... and on a cell after this many failed packets
MAX_PACKETS_PER_RUN = CONFIG.max_packets_per_run
MAX_PACKET_TOKENS = CONFIG.max_packet_tokens  # the server's default cap on a packet
HALF_LIFE = timedelta(hours=24)
CONTEXT_TOKENS = 200_000
CODE_FILL = 0.95  # a scenario of n packets reviews n × 95% of the default packing's budget of code
WARM_PACKETS = 100  # the earlier audit a warm scheduler learned from is at most this big
# Switched off one at a time (``--without``) to measure what each part is worth.
LEARN_IN_FLIGHT = True  # usage and failures are learned as they arrive, and the host checks between waves
PROMPT_FOLLOWS_PLAN = True  # the dispatch prompt tells the host the mode the run was planned for


@dataclass(frozen=True)
class Scenario:
    tier: str
    accounting: str  # cached (cache reads free) or uncached (every input token charged)
    packets: int  # how many packets the default packing makes of the scenario's code
    kind: str  # what the host can do: refill slots as they free (rolling), or only wait for whole waves
    limits: str  # what the scheduler is told: known, unknown, half, double
    cap: int  # the host's slots
    seed: int
    noise: float = 0.0  # the share of calls the provider refuses at random, with a short retry-after


@dataclass
class Outcome:
    makespan: float
    lower_bound: float  # over the packets this strategy completed
    calls: int
    rate_limited: int
    failed_packets: int
    wasted_tokens: int
    packets: int = 0  # packets completed
    unfinished_files: int = 0  # files not reviewed: given up after max_attempts, or still open after MAX_RUNS
    gave_up_files: int = 0  # files whose packets failed max_attempts times
    mean_width: float = 0.0  # the width in force at each launch, on average
    lone_run_outruns: bool = False  # one subagent alone (default packing) draws input faster than it refills
    reference_bound: float = 0.0  # the scenario's smallest lower bound over the compared strategies

    @property
    def ratio(self) -> float:
        return self.makespan / (self.reference_bound or self.lower_bound)


def sim_limits(values: tuple[int, int, int], confidence: str, accounting: str) -> ResolvedLimits:
    keys = ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute")
    limits = {k: Limit(int(v), "simulated", confidence) for k, v in zip(keys, values, strict=True)}
    limits["context_tokens"] = Limit(CONTEXT_TOKENS, "simulated", confidence)
    limits["output_tokens"] = Limit(min(MAX_TOKENS, values[2] // 4), "simulated", confidence)
    # Anthropic does not charge cache reads; an OpenAI-style provider charges every input token.
    return ResolvedLimits(provider_of(accounting), "sim-model", limits)


def provider_of(accounting: str) -> str:
    return "anthropic" if accounting == "cached" else "openai"


def told_limits(sc: Scenario) -> ResolvedLimits:
    """The limits the scheduler starts from, as the scenario tells them."""
    truth = TIERS[sc.tier]
    if sc.limits == "known":
        return sim_limits(truth, "high", sc.accounting)
    if sc.limits == "unknown":  # nothing configured: the server's built-in table, a low-confidence guess
        guess = resolve_limits("sim-model", provider_of(sc.accounting), ModelConfig())
        keys = ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute")
        return sim_limits(tuple(guess.value(k) for k in keys), "low", sc.accounting)  # type: ignore[arg-type]
    factor = {"half": 0.5, "double": 2.0}[sc.limits]
    return sim_limits(tuple(max(1, int(v * factor)) for v in truth), "medium", sc.accounting)  # type: ignore[arg-type]


def max_tokens_of(sc: Scenario) -> int:
    return min(MAX_TOKENS, TIERS[sc.tier][2] // 4)  # a host keeps max_tokens well inside the output bucket


def naive_budget(sc: Scenario) -> int:
    """The server's default budget with no limit known: the configured cap and the context window.

    Also kept to 60% of the true input bucket: without it a 40k-token packet on the low tier, re-sending
    over 30k tokens per call, would never be admitted and the audit never finish.
    """
    truth = TIERS[sc.tier]
    return min(MAX_PACKET_TOKENS, sim_limits(truth, "low", sc.accounting).packet_budget, int(truth[1] * 0.6))


def code_of(sc: Scenario, seed: int | None = None, packets: int | None = None) -> list[tuple[str, int]]:
    n = sc.packets if packets is None else packets
    return list(_code(sc.seed if seed is None else seed, int(n * naive_budget(sc) * CODE_FILL)))


@functools.lru_cache(maxsize=64)
def _code(seed: int, tokens: int) -> tuple[tuple[str, int], ...]:
    return tuple(code(random.Random(seed), tokens))


def packets_of(sc: Scenario, files: list[tuple[str, int]], budget: int, run: int) -> list[Packet]:
    """The scenario's packets over ``files``; a packet's calls depend only on the seed and its contents."""
    out = []
    for group in pack(files, budget):
        size = sum(t for _, t in group)
        calls = _calls(sc.seed, group[0][0], len(group), size, max_tokens_of(sc), sc.accounting == "cached")
        out.append(Packet(f"R{run}-{group[0][0]}+{len(group)}", size, calls, tuple(group)))
    return out


@functools.lru_cache(maxsize=200_000)
def _calls(seed: int, first: str, files: int, size: int, max_tokens: int, cached: bool) -> tuple[Call, ...]:
    rng = random.Random(f"{seed}:{first}:{files}:{size}")
    return _make_packet(rng, "", size, max_tokens, cached).calls


def true_profile(packets: list[Packet]) -> Learned:
    """The run profile of ``packets`` as it truly is: their means, and each quantity fitted against size
    over all of them alike."""
    n = len(packets)
    fits: dict[str, Fit] = {}
    for p in packets:
        for key, y in usage_of(p, p.duration, 0).items():
            if key in FIT_KEYS:
                fits[key] = folded(fits.get(key), p.text_tokens, y, keep=1.0)
    return Learned(
        size_fits=fits,
        run_seconds=sum(p.duration for p in packets) / n,
        input_ratio=sum(p.input_tokens for p in packets) / sum(p.text_tokens for p in packets),
        output_tokens=sum(sum(c.output_tokens for c in p.calls) for p in packets) / n,
        calls=sum(len(p.calls) for p in packets) / n,
    )


def ceiling_of(sc: Scenario) -> tuple[int, int, int]:
    """What an operator may draw: the true limits, or the configured ones where they are lower (``half``)."""
    told = told_limits(sc) if sc.limits in ("half", "double") else None
    keys = ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute")
    truth = TIERS[sc.tier]
    if told is None:
        return truth
    return tuple(min(t, told.value(k)) for t, k in zip(truth, keys, strict=True))  # type: ignore[return-value]


def oracle_budget(sc: Scenario, files: list[tuple[str, int]], limits_of: tuple[int, int, int] | None = None) -> int:
    """The budget the scheduler's formulas give from the true limits (or ``limits_of``) and the true run profile
    of the packets they pack (the profile depends on the packing: two rounds from the default packing settle it)."""
    limits = sim_limits(limits_of or TIERS[sc.tier], "high", sc.accounting)
    budget = naive_budget(sc)
    for _ in range(2):
        budget = packet_token_budget(limits, true_profile(packets_of(sc, files, budget, 0)), MAX_PACKET_TOKENS, sc.cap)
    return budget


class Strategy(Protocol):
    def budget(self, pending: list[tuple[str, int]]) -> int: ...

    def start_run(self, packets: list[Packet], clock: float) -> tuple[list[Packet], Controller, float]: ...

    def end_run(self, packets: list[Packet], result: RunResult, clock: float) -> None: ...


class FixedWidth:
    """A fixed width, dispatched the host's own way, in the given order, packed with a fixed budget."""

    def __init__(self, sc: Scenario, width: int, budget: int, *, longest_first: bool) -> None:
        self.sc, self.width, self._budget, self.longest_first = sc, width, budget, longest_first

    def budget(self, pending: list[tuple[str, int]]) -> int:
        return self._budget

    def start_run(self, packets: list[Packet], clock: float) -> tuple[list[Packet], Controller, float]:
        order = sorted(packets, key=lambda p: -p.text_tokens) if self.longest_first else list(packets)
        return order, Fixed(self.width, self.sc.kind), clock

    def end_run(self, packets: list[Packet], result: RunResult, clock: float) -> None:
        return None


class StaticPlan:
    """A dispatch plan followed as written, as its prompt says: its mode, width, waves and launch offsets."""

    def __init__(self, plan: Schedule, resume_at: float) -> None:
        self.plan, self.resume_at = plan, resume_at
        self.offsets = dict(zip(plan.order, plan.launch_offsets, strict=True))

    def orders(self, now: float, launched: int, waiting: frozenset[str]) -> Orders:
        done, wave = 0, self.plan.wave_size
        for size in self.plan.waves:
            if done >= launched:
                wave = size
                break
            done += size
        mode = self.plan.dispatch_mode if PROMPT_FOLLOWS_PLAN else "whole_wave"
        return Orders(mode, self.plan.wave_size, wave, self.offsets, self.resume_at, capacity=self.plan.capacity)

    def finished(self, packet: Packet, usage: dict[str, float], now: float) -> None:
        return None

    def failed(self, packet: Packet, error: str, now: float) -> None:
        return None


class LivePlan:
    """A run as the server runs it: usage and failures are learned as they arrive, and between waves (for a
    rolling host, whenever a subagent finishes) the host checks the plan again (``plan_status``): the width,
    the cooldown and the start times of the packets it has not launched yet."""

    def __init__(self, owner: Scheduler, packets: list[Packet], order: list[str], start: float) -> None:
        self.owner, self.start = owner, start
        self.loads = [PacketLoad(p.packet_id, p.text_tokens, units=len(p.files)) for p in packets]
        self.order = order
        self.mean = sum(p.text_tokens for p in packets) / len(packets)
        self.in_use = 1.0
        self.launched_ended = 0  # packets that finished or failed: the rest of those launched are running
        # When the host last checked the plan with something new to say (a launch, a finish, a failure): a host
        # told to start a packet at +Ns starts it then, it does not ask again and again as the time nears.
        self.event, self.seen = start, 0
        self.last: tuple[Learned, int, float, Orders] | None = None

    def _now(self, seconds: float) -> datetime:
        return self.owner.t0 + timedelta(seconds=seconds)

    def _context(self) -> Context:
        seen = with_observed(self.owner.limits, self.owner.learned)
        return Context(seen, self.owner.sc.cap, self.owner.sc.kind, self.mean, self.in_use, HALF_LIFE)

    def orders(self, now: float, launched: int, waiting: frozenset[str]) -> Orders:
        owner = self.owner
        # The answer changes only with what was learned, what was launched, and time (a cooldown ends, the
        # learned cap decays): a host woken to start a paced packet asks again with nothing new.
        last = self.last
        if last is not None and last[0] is owner.learned and last[1] == launched and now - last[2] < 60:
            return last[3]
        seen = with_observed(owner.limits, owner.learned)
        if launched != self.seen:
            self.event, self.seen = now, launched
        elapsed, running = max(0.0, self.event - self.start), launched - self.launched_ended
        live = replan(
            seen,
            owner.learned,
            owner.sc.cap,
            owner.sc.kind,
            self.loads,
            waiting,
            self._now(now),
            elapsed=elapsed,
            running=running,
        )
        self.in_use = live.capacity
        cooldown = live.schedule.cooldown_until
        resume = (cooldown - owner.t0).total_seconds() if cooldown else 0.0
        wave = live.waves[0] if live.waves else 1
        mode = live.schedule.dispatch_mode if PROMPT_FOLLOWS_PLAN else "whole_wave"
        answer = Orders(mode, live.width, wave, live.offsets, resume, frozenset(live.held), live.capacity)
        self.last = (owner.learned, launched, now, answer)
        return answer

    def finished(self, packet: Packet, usage: dict[str, float], now: float) -> None:
        self.launched_ended, self.event = self.launched_ended + 1, now
        self.owner.learned = learn_usage(self.owner.learned, usage, packet.text_tokens, self._now(now), self._context())

    def failed(self, packet: Packet, error: str, now: float) -> None:
        self.launched_ended, self.event = self.launched_ended + 1, now
        self.owner.learned = learn_failure(self.owner.learned, error, self._now(now), self._context())


class Scheduler:
    """The server's scheduler: told the limits as the scenario says, learning from what each run reports."""

    def __init__(self, sc: Scenario, limits: ResolvedLimits, learned: Learned, t0: datetime, *, oracle: bool = False):
        self.sc, self.limits, self.learned, self.t0, self.oracle = sc, limits, learned, t0, oracle
        self.width = 1
        self.live: LivePlan | None = None

    def budget(self, pending: list[tuple[str, int]]) -> int:
        if self.oracle:
            return oracle_budget(self.sc, pending)
        seen = with_observed(self.limits, self.learned)
        return packet_token_budget(seen, self.learned, MAX_PACKET_TOKENS, self.sc.cap)

    def start_run(self, packets: list[Packet], clock: float) -> tuple[list[Packet], Controller, float]:
        now = self.t0 + timedelta(seconds=clock)
        if self.oracle:
            self.learned = true_profile(packets)
        seen = with_observed(self.limits, self.learned)
        loads = [PacketLoad(p.packet_id, p.text_tokens, units=len(p.files)) for p in packets]
        plan = schedule(seen, self.learned, self.sc.cap, self.sc.kind, loads, now, half_life=HALF_LIFE)
        wait = (plan.cooldown_until - now).total_seconds() if plan.cooldown_until else 0.0
        start = clock + max(0.0, wait)
        order = {pid: i for i, pid in enumerate(plan.order)}
        self.width = plan.wave_size
        launch = sorted(packets, key=lambda p: order[p.packet_id])
        self.live = LivePlan(self, packets, plan.order, start)
        if self.oracle or not LEARN_IN_FLIGHT:  # the oracle knows the truth from the start: nothing to learn
            self.live.in_use = plan.capacity
            return launch, StaticPlan(plan, start), start
        return launch, self.live, start

    def end_run(self, packets: list[Packet], result: RunResult, clock: float) -> None:
        if self.oracle or self.live is None:
            return
        done = [p for p in packets if p.packet_id in result.finished]
        usage = [usage_of(p, result.finished[p.packet_id], result.throttled.get(p.packet_id, 0)) for p in done]
        at = self.t0 + timedelta(seconds=clock)
        if not LEARN_IN_FLIGHT:  # everything the run reported, learned at its merge
            for packet, use in zip(done, usage, strict=True):
                self.learned = learn_usage(self.learned, use, packet.text_tokens, at, self.live._context())
        taught = run_outcome(
            launched=len(packets),
            wave_size=self.width,
            succeeded=len(done),
            reported=result.failed,
            usage=usage,
            now=at,
            learned_already=set(result.failed) if LEARN_IN_FLIGHT else set(),  # learned as the host reported it
        )
        self.learned = learn_run(self.learned, taught, at, self.live._context())


@dataclass
class _Totals:
    calls: int = 0
    rate_limited: int = 0
    wasted_tokens: int = 0
    failed: int = 0
    widths: list[float] = field(default_factory=list)


def run_audit(
    sc: Scenario,
    strategy: Strategy,
    files: list[tuple[str, int]],
    provider: Provider,
    *,
    deadline: float = float("inf"),
    give_up_aborts: bool = False,
) -> tuple[Outcome, float] | None:
    """One audit of ``files``: runs until everything is reviewed or given up (or MAX_RUNS); the end time too.

    None once the clock passes ``deadline``, or (with ``give_up_aborts``) once a file is given up: the search
    for the best fixed width stops following a width that can no longer be the best.
    """
    index = {fid: i for i, (fid, _) in enumerate(files)}
    pending = list(files)
    attempts: dict[str, int] = {}
    gave_up: list[tuple[str, int]] = []
    clock = 0.0
    totals = _Totals()
    completed: list[Packet] = []
    rng = random.Random(f"host:{sc.seed}")
    for run in range(MAX_RUNS):
        if not pending:
            break
        packets = packets_of(sc, pending, strategy.budget(pending), run)
        packets, held = packets[:MAX_PACKETS_PER_RUN], packets[MAX_PACKETS_PER_RUN:]
        order, controller, start = strategy.start_run(packets, clock)
        result = run_packets(provider, order, controller, sc.kind == "rolling", start, rng, deadline)
        clock = max(result.end, start)
        if result.aborted:
            return None
        totals.calls += result.calls
        totals.rate_limited += result.rate_limited
        totals.wasted_tokens += result.wasted_tokens
        totals.failed += len(result.failed)
        totals.widths += result.widths
        strategy.end_run(packets, result, clock)
        completed += [p for p in packets if p.packet_id in result.finished]
        retry = [f for p in packets if p.packet_id in result.failed for f in p.files]
        for fid, _ in retry:
            attempts[fid] = attempts.get(fid, 0) + 1
        gave_up += [f for f in retry if attempts[f[0]] >= MAX_ATTEMPTS]
        if gave_up and give_up_aborts:
            return None
        # Packets the run held back (or had no room for) go back without counting an attempt.
        waiting = held + [p for p in packets if p.packet_id in result.held]
        again = [f for f in retry if attempts[f[0]] < MAX_ATTEMPTS] + [f for p in waiting for f in p.files]
        # The queue is read in path order: failed files go back among those not yet handed out.
        pending = sorted(again, key=lambda f: index.get(_file(f), 0))
    bound = lower_bound(completed, TIERS[sc.tier], sc.cap, sc.kind) if completed else 0.0
    outcome = Outcome(
        clock,
        bound,
        totals.calls,
        totals.rate_limited,
        totals.failed,
        totals.wasted_tokens,
        packets=len(completed),
        unfinished_files=len({_file(f) for f in pending + gave_up}),
        gave_up_files=len({_file(f) for f in gave_up}),
        mean_width=sum(totals.widths) / len(totals.widths) if totals.widths else 0.0,
    )
    return outcome, clock


def _file(piece: tuple[str, int]) -> str:
    """The file a piece of a packet belongs to (a large file is cut into ``f00001.0``, ``f00001.1``, ...)."""
    return piece[0].split(".")[0]


def provider_for(sc: Scenario, limits_of: tuple[int, int, int] | None = None) -> Provider:
    return Provider(limits_of or TIERS[sc.tier], max_tokens_of(sc), sc.noise, random.Random(f"provider:{sc.seed}"))


def simulate(sc: Scenario, strategy: str, *, warm: bool = False) -> Outcome:
    """One audit of the scenario's code by ``strategy`` (scheduler, oracle, naive, or fixed:W)."""
    files = code_of(sc)
    make = _strategies(sc, files)
    if strategy == "scheduler" and warm:
        # The learned state an earlier audit (of other code) on the same model left six hours before.
        earlier = code_of(sc, sc.seed + 1, min(sc.packets, WARM_PACKETS))
        first = Scheduler(sc, told_limits(sc), Learned(), EPOCH)
        _, ended = _finished(run_audit(sc, first, earlier, provider_for(sc)))
        chosen: Strategy = Scheduler(sc, told_limits(sc), first.learned, EPOCH + timedelta(seconds=ended, hours=6))
    else:
        chosen = make(strategy)
    outcome, _ = _finished(run_audit(sc, chosen, files, provider_for(sc)))
    outcome.lone_run_outruns = lone_run_outruns(packets_of(sc, files, naive_budget(sc), 0), TIERS[sc.tier][1])
    return outcome


def _strategies(sc: Scenario, files: list[tuple[str, int]]) -> Callable[[str], Strategy]:
    def make(name: str) -> Strategy:
        if name == "scheduler":
            return Scheduler(sc, told_limits(sc), Learned(), EPOCH)
        if name == "oracle":
            return Scheduler(sc, sim_limits(TIERS[sc.tier], "high", sc.accounting), Learned(), EPOCH, oracle=True)
        if name == "naive":
            return FixedWidth(sc, min(sc.cap, 16), naive_budget(sc), longest_first=False)
        if name.startswith("fixed:"):
            return FixedWidth(sc, int(name.split(":")[1]), oracle_budget(sc, files), longest_first=True)
        raise ValueError(name)

    return make


def _finished(result: tuple[Outcome, float] | None) -> tuple[Outcome, float]:
    assert result is not None  # only the search for the best fixed width abandons an audit
    return result


# ``best_fixed_polite`` keeps to the target the scheduler is held to: at most this share of its calls refused.
POLITE_SHARE = 0.01


def best_fixed(
    sc: Scenario, guess: int | None = None, *, ceiling: bool = False, polite: bool = False
) -> tuple[Outcome, int]:
    """The best fixed width for the scenario in hindsight (every width from 1 to the host's, at most 16): the
    fewest files left unreviewed, then the shortest makespan. With ``ceiling``, for an operator who obeys the
    configured limits too: the provider refuses what exceeds ``ceiling_of(sc)``, and the packets are packed
    for it (the lower bound stays the true limits', as every strategy's does).

    ``guess`` (e.g. the oracle's width) is tried first. Every other width is followed only while it can still
    win: a width is abandoned once its clock passes the best makespan found (when that one reviewed every
    file), or once it gives a file up; and once the slots alone (Σ durations / w) bound a width's makespan
    above the best, it is not tried at all. With ``polite``, only widths whose calls met at most
    ``POLITE_SHARE`` of 429s count (width 1 always does): the best a fixed width does within the 429 target.
    """
    files = code_of(sc)
    limits_of = ceiling_of(sc) if ceiling else None
    budget = oracle_budget(sc, files, limits_of)
    total = sum(p.duration for p in packets_of(sc, files, budget, 0))
    widest = min(sc.cap, 16)
    first = max(1, min(widest, guess or widest))
    best: tuple[Outcome, int] | None = None
    for width in [first, *(w for w in range(widest, 0, -1) if w != first)]:
        clean = best is not None and best[0].unfinished_files == 0
        if best is not None and total / width >= best[0].makespan:
            continue
        result = run_audit(
            sc,
            FixedWidth(sc, width, budget, longest_first=True),
            files,
            provider_for(sc, limits_of),
            deadline=best[0].makespan if clean and best is not None else float("inf"),
            give_up_aborts=clean,
        )
        if result is None:
            continue
        outcome = result[0]
        if polite and width > 1 and outcome.rate_limited > POLITE_SHARE * outcome.calls:
            continue
        if best is None or (outcome.unfinished_files, outcome.makespan) < (best[0].unfinished_files, best[0].makespan):
            best = (outcome, width)
    assert best is not None
    best[0].lone_run_outruns = lone_run_outruns(packets_of(sc, files, naive_budget(sc), 0), TIERS[sc.tier][1])
    return best
