"""Learning from what runs report, as it arrives: each packet's usage, each failure, each merged run.

Pure: the learned state, one piece of evidence, what the plan was when the evidence was made (``Context``)
and ``now`` in; the new learned state out.

- **Calibration** (``calibration``): a packet's ``usage`` moves the run profile, each quantity fitted against
  that packet's own estimated tokens, so the order packets report in does not skew it.
- **Throttling as a rate**: the calls and rate-limited calls that usage reports fill a window that decays
  with time (``WINDOW_HALF_LIFE``). The runs are throttled when the window holds at least ``MIN_THROTTLED``
  rate-limited calls and they are at least ``THROTTLED_SHARE`` of its calls: a trickle of 429s on a busy
  shared key stays under it however many calls a run makes.
- **One correction per cause**: when the recalibrated profile, or a limit a 429 message just quoted, would
  have made the plan narrower than the width in use, the 429s are explained: the physical cap, recomputed
  from them, already corrects the width, and the learned cap is not also cut. 429s the calibration cannot
  explain cut the learned cap: a rate-limited failure halves it, and so do retries the host absorbed in slow
  start (whose last step doubled the width); past it, absorbed retries take a quarter off. Nothing is rounded:
  the cap is a capacity (runs at once on average, ``scheduler.Schedule.capacity``), so a throttled 2 becomes
  1.5 (two slots, the second paced to half the time), not 1.
- **One decrease per width**: evidence from packets that started before the last decrease (usage whose
  seconds reach back past it; a failure within one run length of it) is not counted against the new width.
- **A configured limit throttling contradicts**: when the window is throttled while a configured (medium)
  input limit says the runs fit, and the runs re-send their whole context on every call (so they draw
  evenly), the limit is lowered to what they drew together (``_inferred``): absorbed retries never quote the
  real limit, and a bucket refusing calls delivers no more than that.
- **A built-in guess throttling bears out**: a guessed (low-confidence) limit does not bind, so a key on a
  better tier than the built-in table is not held to it. When the window is throttled at about the width the
  guess itself allows (``CORROBORATED_WITHIN``), and no limit known better sets a width near it, the key is
  on that tier: the guess that binds first is kept (``_corroborated``) and binds from then on, at medium
  confidence, so launches are paced to it rather than the cap cutting and growing back into the same 429s.
  Runs that came back clean far above what the guess allows (``Learned.clean_width``) refute it for good.
  It lapses after one half-life (``profile.lapsed``): a bound guess is never throttled, so nothing else would
  ever free a key whose account has moved up a tier.
- **Probing a throttled width less often**: the width a throttling cut was made at is remembered; each further
  cut at that same width (within ``REPEAT_WITHIN``) doubles the clean waves the cap needs before it grows
  back into it (at most ``2**MAX_REPEATS``), and a clean wave that grows the cap past it forgets it, so a
  formula that overrates a width by a fraction of a run does not turn into a sawtooth of throttled waves.
  (Growing back to 3 from a cut at 3 only, not past it, measured slower: the cut and the growth then meet
  at the throttled width again and again.)
- **Slow start**: with nothing known, the first wave is narrow (``scheduler.SLOW_START_WIDTH``); each clean
  wave doubles the cap until the first decrease sets a threshold; above it a clean wave adds one. A wave is
  as many clean packets as the cap, counted only from packets that started after the cap last moved (a
  packet that ran at an older width proves nothing about this one). Growth needs the cap to be what limits
  the width, and stops at the physical cap.
- **One audit's word is bounded** (``claims``): every evidence carries its teacher (the audit's repository);
  a text quoting a limit far below what is known, or asking for a wait longer than a per-minute bucket's, is
  held as a claim and teaches nothing until another audit corroborates it.
- A rate-limited failure sets a cooldown (its ``retry-after`` or the exhausted bucket's reset, else a
  minute); absorbed retries set none (the host already waited). A hard stop holds until a packet succeeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from audit_mcp.scheduling.calibration import THROTTLED_SHARE, calibrated, clean
from audit_mcp.scheduling.claims import INFERRED, Verdict, observed, weigh
from audit_mcp.scheduling.limits import Limit, ResolvedLimits
from audit_mcp.scheduling.profile import (
    CACHED_RATIO,
    DEFAULT_RUN_SECONDS,
    PER_MINUTE,
    Learned,
    binding_rates,
    decayed,
    lapsed,
    run_profile,
    with_observed,
)
from audit_mcp.scheduling.ratelimits import RateLimitSignal, parse_error_text, stop_summary
from audit_mcp.scheduling.scheduler import WHOLE_WITHIN, burst_runs, capacity_bounds, physical_cap, slow_start

DEFAULT_COOLDOWN = timedelta(seconds=60)
MAX_LEARNED_CAP = 64
WINDOW_HALF_LIFE = timedelta(minutes=10)
# Throttled: at least this many rate-limited calls in the window, and at least this share of its calls. The
# share is several times the 0.5–2% of calls a busy shared key sees refused at random.
MIN_THROTTLED = 3
FAILURE_DECREASE = 0.5
MAX_REPEATS = 5  # at most 2**5 clean waves before a width throttled again and again is tried once more
ABSORBED_DECREASE = 0.75
# A cut at a capacity within this of the one the last cut was made at is a cut at the same width again.
REPEAT_WITHIN = 0.5
# A built-in guess is borne out by runs throttled at no more than 1/this of the width it allows (a right guess
# that does not bind is overrun by bursts and by the cap's growth before its runs are refused; one that allows
# less than this would have seen them refused long before), and a limit known better takes the blame for 429s
# at a width within as much of its own.
CORROBORATED_WITHIN = 2 / 3


@dataclass(frozen=True)
class Context:
    """What the plan was when the evidence was made."""

    limits: ResolvedLimits  # as the plan saw them (observed ones included)
    host_cap: int
    host_kind: str
    mean_tokens: float  # the run's mean packet estimate
    in_use: float  # the capacity the host was told (runs at once on average; ``scheduler.Schedule.capacity``)
    half_life: timedelta = timedelta(hours=24)
    # Whose word the evidence is: a digest of the audit's repository identity (``claims``), and the limits as
    # known without any learned value (the table and the configuration), against which its word is bounded.
    teacher: str = ""
    base: ResolvedLimits | None = None


@dataclass(frozen=True)
class RunOutcome:
    """What a merged run says that its packets' usage and reported failures have not already said."""

    launched: int
    wave_size: int
    succeeded: int
    rate_limited: int  # packets that failed rate-limited, whether learned before or not
    failures: Sequence[str] = ()  # error texts not learned yet
    absorbed: int = 0  # rate-limited calls the host retried, as the runs' usage reported them
    calls: int = 0  # calls the runs' usage reported
    observed_limits: dict[str, int] = field(default_factory=dict)
    hard_stop: str | None = None
    limited_texts: Sequence[str] = ()  # the error texts of every packet that failed rate-limited


def prior_cap(learned: Learned, ctx: Context) -> float:
    """The physical cap the learned cap decays toward and grows no further than."""
    return physical_cap(with_observed(ctx.limits, learned), ctx.host_cap, ctx.mean_tokens, learned, ctx.host_kind)[0]


def learn_usage(
    learned: Learned, usage: Mapping[str, float], estimated_tokens: int, now: datetime, ctx: Context
) -> Learned:
    """Fold one finished packet's ``usage`` in: calibration, the throttling window, and the cap."""
    return _held(_learned_usage(learned, usage, estimated_tokens, now, ctx), ctx)


def _learned_usage(
    learned: Learned, usage: Mapping[str, float], estimated_tokens: int, now: datetime, ctx: Context
) -> Learned:
    cold = learned.cap is None and slow_start(ctx.limits, learned)
    state = _anchored(_materialised(learned, ctx, now), ctx, cold)
    state = calibrated(state, usage, estimated_tokens)
    calls, limited = float(usage.get("api_calls") or 0.0), float(usage.get("rate_limited_calls") or 0.0)
    seconds = float(usage.get("seconds") or 0.0)
    started = now - timedelta(seconds=seconds) if seconds else now
    stale = state.last_decrease_at is not None and started < state.last_decrease_at
    if limited:
        state = replace(state, last_429_at=now)
    if stale:  # it ran at the width before the last decrease: it says nothing about the width now
        return state
    state = _windowed(state, now, calls, limited, float(usage.get("input_tokens") or 0.0), seconds)
    if state.window_limited >= MIN_THROTTLED and state.window_limited >= THROTTLED_SHARE * state.window_calls:
        state = _corroborated(_inferred(state, ctx, now), ctx, now)
        # In slow start the last step doubled the width, so the one before it is the one known to hold.
        slow = state.cap is not None and state.threshold is None
        return _decreased(state, ctx, now, FAILURE_DECREASE if slow else ABSORBED_DECREASE)
    if clean(usage):
        widest = max(state.clean_width or 0.0, min(float(ctx.in_use), MAX_LEARNED_CAP))
        return _grown(replace(state, hard_stop=None, clean_width=widest), ctx, started, now)
    return state


def learn_failure(learned: Learned, text: str, now: datetime, ctx: Context) -> Learned:
    """Fold one failed packet's error text in: limits it quotes, hard stops, cooldowns, and the cap. A text that
    claims more than one audit may teach (``claims``) is recorded as a claim and changes nothing else until
    another audit corroborates it."""
    signal = parse_error_text(text, now)
    verdict = _weighed(learned, signal.limits, signal.wait_until(now), now, ctx)
    if verdict.held:
        return verdict.state
    return _held(_learned_failure(verdict.state, signal, verdict, now, ctx), ctx)


def _learned_failure(
    learned: Learned, signal: RateLimitSignal, verdict: Verdict, now: datetime, ctx: Context
) -> Learned:
    cold = learned.cap is None and slow_start(ctx.limits, learned)
    state = _anchored(_materialised(learned, ctx, now), ctx, cold)
    state = observed(state, verdict.limits, now)
    if signal.hard_stop:
        state = replace(state, hard_stop=stop_summary(signal.hard_stop))
    if not signal.rate_limited:
        return state
    wait = verdict.until or now + DEFAULT_COOLDOWN
    until = max(wait, state.cooldown_until) if state.cooldown_until and state.cooldown_until > now else wait
    state = replace(state, last_429_at=now, cooldown_until=until)
    run = timedelta(seconds=state.run_seconds or DEFAULT_RUN_SECONDS)
    if state.last_decrease_at is not None and now - state.last_decrease_at < run:
        return state  # most likely launched before the last decrease
    if not verdict.limits:
        state = _corroborated(state, ctx, now)
    return _decreased(state, ctx, now, FAILURE_DECREASE)


def _weighed(
    state: Learned, limits: Mapping[str, int], until: datetime | None, now: datetime, ctx: Context, prefix: str = ""
) -> Verdict:
    return weigh(
        state, limits, until, now, teacher=ctx.teacher, base=ctx.base, half_life=ctx.half_life, kind_prefix=prefix
    )


def learn_run(learned: Learned, outcome: RunOutcome, now: datetime, ctx: Context) -> Learned:
    """At merge: the failures not learned yet, limits the run observed, and the run counters. Texts held as
    claims (``claims``) count for nothing here either."""
    state = learned
    held = False
    if outcome.observed_limits:
        verdict = _weighed(state, outcome.observed_limits, None, now, ctx)
        held = verdict.held
        state = verdict.state if held else observed(verdict.state, verdict.limits, now)
    for text in outcome.failures:
        state = learn_failure(state, text, now, ctx)
    unheeded = sum(1 for t in outcome.limited_texts if _weighed(state, *_said(t, now), now, ctx).held)
    held = held or unheeded > 0
    throttled = outcome.rate_limited > unheeded or (
        outcome.absorbed >= MIN_THROTTLED and outcome.absorbed >= THROTTLED_SHARE * outcome.calls
    )
    stop = stop_summary(outcome.hard_stop) if outcome.hard_stop and not held else state.hard_stop
    if throttled:
        return replace(
            state, rate_limited_runs=state.rate_limited_runs + 1, hard_stop=stop, updated_at=state.updated_at or now
        )
    if outcome.succeeded and outcome.launched:
        return replace(
            state,
            clean_runs=state.clean_runs + 1,
            hard_stop=stop if outcome.hard_stop else None,
            updated_at=state.updated_at or now,
        )
    return replace(state, hard_stop=stop)


def _said(text: str, now: datetime) -> tuple[dict[str, int], datetime | None]:
    """The limits an error text quotes and the end of the wait it asks for."""
    signal = parse_error_text(text, now)
    return signal.limits, signal.wait_until(now)


def _held(state: Learned, ctx: Context) -> Learned:
    """The whole-wave burst bound now in force, kept for the next estimate to be judged against."""
    runs = burst_runs(with_observed(ctx.limits, state), ctx.mean_tokens, state, ctx.host_kind)
    return replace(state, burst_runs=None if runs is None else min(runs, MAX_LEARNED_CAP))


def _materialised(learned: Learned, ctx: Context, now: datetime) -> Learned:
    """The cap and threshold as decayed to ``now``, stamped ``now``: later decay starts from here."""
    learned = lapsed(learned, now, ctx.half_life)
    prior = prior_cap(learned, ctx)
    return replace(
        learned,
        cap=decayed(learned.cap, learned, prior, now, ctx.half_life),
        threshold=decayed(learned.threshold, learned, prior, now, ctx.half_life),
        updated_at=now,
    )


def _anchored(state: Learned, ctx: Context, cold: bool) -> Learned:
    """In slow start the width in use is the cap the evidence speaks about."""
    return replace(state, cap=float(max(1, ctx.in_use))) if cold and state.cap is None else state


def _windowed(state: Learned, now: datetime, calls: float, limited: float, charged: float, seconds: float) -> Learned:
    keep = 1.0
    if state.window_at is not None:
        elapsed = max(0.0, (now - state.window_at).total_seconds())
        keep = 0.5 ** (elapsed / WINDOW_HALF_LIFE.total_seconds())
    timed = charged > 0 and seconds > 0  # only runs that say both how much and how long measure a draw
    return replace(
        state,
        window_calls=state.window_calls * keep + calls,
        window_limited=state.window_limited * keep + limited,
        window_input=state.window_input * keep + (charged if timed else 0.0),
        window_seconds=state.window_seconds * keep + (seconds if timed else 0.0),
        window_at=now,
    )


def _inferred(state: Learned, ctx: Context, now: datetime) -> Learned:
    """The input limit a throttled window shows, where a configured limit says the runs should fit: while the
    bucket refuses calls it delivers at most its refill, shared among the runs in flight, so the width in use
    times what each run drew per second is what the key really gets. It lowers the configured limit (a
    ceiling, never raised) and any earlier inference; 429s the host's retries absorbed never quote the
    limit, and this is what they say. With no limit configured the learned cap narrows instead, and a limit
    the provider itself gave (high confidence) is the truth."""
    if state.window_seconds <= 0 or state.window_input <= 0:
        return state
    if run_profile(state, ctx.limits.provider)[1] < CACHED_RATIO:
        # A cached run draws its packet as it reads it, early: its 429s come from that peak, which its mean
        # draw understates (the width bounds and the learned cap answer it). Only runs that re-send their
        # whole context on every call draw evenly enough for the mean to measure the bucket.
        return state
    key = "input_tokens_per_minute"
    current = ctx.limits.limits[key]
    per_minute = int(max(1, ctx.in_use) * state.window_input / state.window_seconds * 60)
    if current.confidence != "medium" or per_minute >= current.value:
        return state
    verdict = _weighed(state, {key: per_minute}, None, now, ctx, INFERRED)
    if key not in verdict.limits:  # one audit's runs showing far less than is known: held as a claim
        return verdict.state
    value, by = verdict.limits[key]
    return replace(
        verdict.state,
        inferred_limits={**state.inferred_limits, key: value},
        inferred_by={**state.inferred_by, key: by},
        inferred_at=now,
    )


def _corroborated(state: Learned, ctx: Context, now: datetime) -> Learned:
    """The built-in guess that throttling bears out. A guessed (low-confidence) limit never binds, so a key on a
    better tier is not held to it; but runs refused at about the width the guess itself allows (no less than
    ``CORROBORATED_WITHIN`` of the width in use) show the key is on that tier, and then the guess binds
    (``with_observed``): launches are paced to it instead of the cap cutting and growing back into the same
    429s. Only the limit that would bind first, and only when no limit known better (configured, quoted,
    inferred) sets a width near the one in use: the throttling is that limit's, not the guess's. Runs refused
    far above what the guess allows, or clean far above it before, show a better tier: it stays a guess."""
    seen = with_observed(ctx.limits, state)
    guessed = {k: v for k, v in seen.limits.items() if k in PER_MINUTE and v.confidence == "low"}
    if not guessed or _explained(state, ctx):
        return state
    bound = {k: Limit(v.value, v.source, "medium") for k, v in guessed.items()}
    trial = ResolvedLimits(seen.provider, seen.model, {**seen.limits, **bound})
    bounds = capacity_bounds(trial, ctx.host_cap, ctx.mean_tokens, state, ctx.host_kind)
    width = max(1.0, float(ctx.in_use))
    rates = [k for k in bounds if k != "host"]
    if any(k not in guessed and bounds[k] * CORROBORATED_WITHIN < width for k in rates):
        return state
    first = min(rates, key=lambda k: bounds[k])
    if first not in guessed or bounds[first] < CORROBORATED_WITHIN * max(width, state.clean_width or 0.0):
        return state  # refused far above what it allows, or clean there before: a better tier than the guess
    held = {**state.corroborated_limits, first: guessed[first].value}
    return replace(state, corroborated_limits=held, corroborated_at=now)


def _explained(state: Learned, ctx: Context) -> bool:
    """Whether the learned profile and limits alone now give a narrower width than the one in use."""
    seen = with_observed(ctx.limits, state)
    if not binding_rates(seen):
        return False
    return physical_cap(seen, ctx.host_cap, ctx.mean_tokens, state, ctx.host_kind)[0] < ctx.in_use


def _decreased(state: Learned, ctx: Context, now: datetime, factor: float) -> Learned:
    """One correction for one cause: recalibration when it explains the 429s, else a cut of the cap."""
    reset = replace(
        state, window_calls=0.0, window_limited=0.0, window_at=now, last_decrease_at=now, round_at=now, round_clean=0
    )
    if _explained(state, ctx):
        return reset
    width = max(1.0, float(ctx.in_use))
    cap = max(1.0, min(state.cap if state.cap is not None else width, width) * factor)
    again = state.throttled_width is not None and abs(state.throttled_width - width) < REPEAT_WITHIN
    repeats = state.throttled_repeats + 1 if again else 0
    return replace(reset, cap=cap, threshold=cap, throttled_width=width, throttled_repeats=min(MAX_REPEATS, repeats))


def _grown(state: Learned, ctx: Context, started: datetime, now: datetime) -> Learned:
    """A clean packet at the width the cap sets. Once a whole wave of them (as many as the cap) started
    after the cap last moved has come back clean, the cap doubles (slow start, below the threshold the last
    decrease left) or grows by one. Packets that started before it moved ran at an older width: they prove
    nothing about this one, so feedback that arrives a run length late cannot push the cap past what was
    proven."""
    if state.cap is None or ctx.in_use < state.cap - WHOLE_WITHIN:  # the cap is not what limits the width
        return state
    if state.round_at is not None and started < state.round_at:
        return state
    counted = state.round_clean + 1
    wave = max(1, math.floor(state.cap))
    if state.throttled_width is not None and state.cap + 1 >= state.throttled_width:
        wave *= 2**state.throttled_repeats  # back into a width throttled again and again: probe it less often
    if counted < wave:
        return replace(state, round_clean=counted)
    ceiling = float(min(MAX_LEARNED_CAP, max(1, prior_cap(state, ctx))))
    if state.threshold is None or state.cap < state.threshold:
        grown = min(2 * state.cap, state.threshold or 2 * state.cap)
    else:
        grown = state.cap + 1
    cap = max(state.cap, min(ceiling, grown))
    if state.throttled_width is not None and cap > state.throttled_width + WHOLE_WITHIN:  # proved: forgotten
        state = replace(state, throttled_width=None, throttled_repeats=0)
    return replace(state, cap=cap, round_at=now, round_clean=0)
