"""Learning from a merged run: AIMD on the learned cap, cooldowns, hard stops, and the run profile.

Pure: the learned state, one run's outcome, ``now``, the prior and the half-life in; the new learned
state out. A run is throttled when a packet failed rate-limited, or when its packets' ``usage`` reports
at least ``ABSORBED_LIMIT`` rate-limited calls that the host's retries absorbed. A failure halves the cap
and sets a cooldown; absorbed retries take a quarter off and set none (the host already waited). Either
moves the cap at most once a minute. A clean, well-used run adds one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from audit_mcp.scheduling.profile import Learned, decayed_cap

DECREASE_INTERVAL = timedelta(seconds=60)
DEFAULT_COOLDOWN = timedelta(seconds=60)
MAX_LEARNED_CAP = 64
RUN_WEIGHT = 0.5  # how far one merged run moves the learned run profile
# Rate-limited calls in one run, retried by the host and reported in ``usage``, that count as throttling: a
# stray one or two are the provider's noise, three or more mean the run drew faster than the limits refill.
ABSORBED_LIMIT = 3
ABSORBED_DECREASE = 0.75


@dataclass(frozen=True)
class RunOutcome:
    """What one merged run says about the limits."""

    launched: int
    wave_size: int
    succeeded: int
    rate_limited: int
    wait_until: datetime | None = None
    hard_stop: str | None = None
    observed_limits: dict[str, int] = field(default_factory=dict)
    usage: Sequence[dict[str, float]] = ()
    estimated_tokens: Sequence[int] = ()
    absorbed: int = 0  # rate-limited calls the host retried successfully, as the runs' usage reported them


def learn(learned: Learned, outcome: RunOutcome, now: datetime, prior: float, half_life: timedelta) -> Learned:
    """AIMD on the learned cap, cooldowns, hard stops, and usage calibration, from one run's outcome.

    A run is throttled when a packet failed rate-limited, or when its packets' ``usage`` reports at least
    ``ABSORBED_LIMIT`` rate-limited calls that the host's retries absorbed. A failure halves the cap and
    sets a cooldown; absorbed retries take a quarter off and set none (the host already waited). Either
    moves the cap at most once a minute.
    """
    current = decayed_cap(learned, prior, now, half_life)
    base = current if current is not None else float(max(1, outcome.wave_size))
    updated = replace(learned, updated_at=now)
    if outcome.observed_limits:
        updated = replace(
            updated, observed_limits={**learned.observed_limits, **outcome.observed_limits}, observed_at=now
        )
    if outcome.hard_stop:
        updated = replace(updated, hard_stop=outcome.hard_stop)
    throttled = outcome.rate_limited or outcome.absorbed >= ABSORBED_LIMIT
    if throttled:
        recently = learned.last_decrease_at is not None and now - learned.last_decrease_at < DECREASE_INTERVAL
        # A failure halves the cap; retries the host absorbed take a quarter off (a narrow wave halved loses half
        # its speed for what cost a few seconds of waiting).
        width = min(base, outcome.wave_size)
        smaller = math.floor(width * 0.5) if outcome.rate_limited else math.floor(width * ABSORBED_DECREASE + 0.5)
        cap: float | None = base if recently else max(1.0, smaller)
        until = learned.cooldown_until  # retries the host absorbed are already waited out: no new cooldown
        if outcome.rate_limited:
            until = max(outcome.wait_until, now) if outcome.wait_until else now + DEFAULT_COOLDOWN
        if outcome.observed_limits and outcome.observed_limits != learned.observed_limits:
            # The provider just said what its limits are: the physical cap, recomputed from them, governs.
            cap = None
        updated = replace(
            updated,
            cap=cap,
            last_429_at=now,
            cooldown_until=until,
            last_decrease_at=learned.last_decrease_at if recently else now,
            rate_limited_runs=learned.rate_limited_runs + 1,
        )
    elif outcome.absorbed:
        updated = replace(updated, last_429_at=now)  # a stray retry: neither narrower nor wider
    elif outcome.succeeded and outcome.launched and outcome.wave_size < base / 2:
        updated = replace(updated, hard_stop=outcome.hard_stop)
    elif outcome.succeeded and outcome.launched:
        grown = None if current is None else min(float(MAX_LEARNED_CAP), base + 1)
        updated = replace(updated, cap=grown, clean_runs=learned.clean_runs + 1, hard_stop=outcome.hard_stop)
    return _calibrate(updated, outcome)


def _ewma(old: float | None, new: float | None, weight: float) -> float | None:
    if new is None:
        return old
    return new if old is None else old + weight * (new - old)


def _calibrate(learned: Learned, outcome: RunOutcome) -> Learned:
    """Fold reported usage (tokens, calls, seconds per run) into the run profile, once per merged run.

    The input ratio is the run's total over its total estimate, not a mean of per-packet ratios: small
    packets carry the same fixed overhead per call and would otherwise inflate it.
    """
    charged = [
        (u["input_tokens"], e)
        for u, e in zip(outcome.usage, outcome.estimated_tokens, strict=False)
        if u.get("input_tokens") and e
    ]
    ratio = sum(i for i, _ in charged) / sum(e for _, e in charged) if charged else None
    # A throttled packet is slow for the wrong reason: its seconds say nothing about the work. A run with
    # rate-limited failures teaches none; otherwise the packets that report no rate-limited call do.
    unthrottled = [u for u in outcome.usage if not u.get("rate_limited_calls")]
    seconds = None if outcome.rate_limited else _mean(unthrottled, "seconds")
    return replace(
        learned,
        input_ratio=_ewma(learned.input_ratio, ratio, RUN_WEIGHT),
        output_tokens=_ewma(learned.output_tokens, _mean(outcome.usage, "output_tokens"), RUN_WEIGHT),
        calls=_ewma(learned.calls, _mean(outcome.usage, "api_calls"), RUN_WEIGHT),
        run_seconds=_ewma(learned.run_seconds, seconds, RUN_WEIGHT),
    )


def _mean(usage: Sequence[dict[str, float]], key: str) -> float | None:
    """The mean of ``key`` over the usage blocks that report it."""
    seen = [u[key] for u in usage if u.get(key)]
    return sum(seen) / len(seen) if seen else None
