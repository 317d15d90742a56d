"""One subagent run as the scheduler sees it: the learned state, the run profile, and the binding rates.

A run re-sends its context on every call, so what it draws on each bucket is its packet's tokens times
an input ratio (plus output tokens and calls per run). The priors below are corrected by observed
``usage`` blocks; only limits known with medium or high confidence bind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from audit_mcp.scheduling.limits import Limit, ResolvedLimits

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
# A run charged less than this many input tokens per token of packet text is cached (cache reads are free):
# it draws its input as it reads the packet, early. Above it every call re-sends everything.
CACHED_RATIO = 4.0
INFERRED_SOURCE = "inferred from throttled runs"  # how a limit lowered by ``learning._inferred`` is shown
_PER_MINUTE = ("input_tokens_per_minute", "output_tokens_per_minute", "requests_per_minute")


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
    # Slow start: the learned cap doubles per clean wave below this threshold (None: no decrease yet), then
    # grows by one per clean wave. A wave is counted from the packets that started after the cap last moved.
    threshold: float | None = None
    # The width in use when throttling last cut the cap, and how many cuts in a row were made at that width:
    # each one doubles the clean waves the cap needs before it grows back into that width.
    throttled_width: int | None = None
    throttled_repeats: int = 0
    round_at: datetime | None = None
    round_clean: int = 0
    # Calls and rate-limited calls reported in ``usage``, decayed with time: throttling is judged as a rate.
    window_calls: float = 0.0
    window_limited: float = 0.0
    window_at: datetime | None = None
    # Charged input tokens and packet tokens of recent runs, decayed per run: the input ratio is their quotient.
    calibration_input: float = 0.0
    calibration_tokens: float = 0.0
    # Charged input tokens and seconds the same usage reported, decayed alongside the calls.
    window_input: float = 0.0
    window_seconds: float = 0.0
    # Per-minute limits inferred from throttled usage (the width in use times what each run drew while the
    # bucket refused calls): a bucket that throttles runs delivers its refill, so that is the limit. Lower only.
    inferred_limits: dict[str, int] = field(default_factory=dict)
    inferred_at: datetime | None = None

    @property
    def known(self) -> bool:
        """Whether anything was learned at all: a cap, a run, a rate limit or an observed limit."""
        return bool(
            self.cap is not None
            or self.clean_runs
            or self.rate_limited_runs
            or self.run_seconds
            or self.observed_limits
            or self.last_429_at
        )


def decayed_cap(learned: Learned, prior: float, now: datetime, half_life: timedelta) -> float | None:
    """The learned cap pulled back toward ``prior`` by the time since it was learned."""
    return decayed(learned.cap, learned, prior, now, half_life)


def decayed(value: float | None, learned: Learned, prior: float, now: datetime, half_life: timedelta) -> float | None:
    """A learned width (the cap, the slow-start threshold) pulled back toward ``prior`` with the half-life."""
    if value is None or learned.updated_at is None:
        return None
    elapsed = max(0.0, (now - learned.updated_at).total_seconds())
    weight: float = 0.5 ** (elapsed / max(1.0, half_life.total_seconds()))
    return prior + (value - prior) * weight


def run_profile(learned: Learned, provider: str = "") -> tuple[float, float, float, float]:
    """Seconds, input ratio, output tokens and calls of one subagent run: learned, else the priors."""
    ratio = learned.input_ratio or DEFAULT_INPUT_RATIO.get(provider, UNCACHED_INPUT_RATIO)
    return (
        learned.run_seconds or DEFAULT_RUN_SECONDS,
        ratio,
        learned.output_tokens or DEFAULT_OUTPUT_TOKENS,
        learned.calls or DEFAULT_CALLS,
    )


def binding_rates(limits: ResolvedLimits) -> dict[str, float]:
    """Refill per second of each limit known well enough to bind.

    A guessed (low-confidence) tier would throttle every better-off user; learning from 429s narrows instead.
    """
    return {key: limits.value(key) / 60.0 for key in _PER_MINUTE if limits.limits[key].confidence != "low"}


def planning_ratio(learned: Learned, provider: str) -> float:
    """The input ratio widths and launch pacing are planned with: the learned one; before any usage, for a
    provider that charges cache reads, the prior; for one that charges every input token, the most a run
    can draw, each of its calls re-sending the whole packet (the prior's guess at how much less it re-sends
    varies with the packet, the model and the tools: a first wave planned on it may outrun the bucket)."""
    if learned.input_ratio:
        return learned.input_ratio
    if provider in DEFAULT_INPUT_RATIO:
        return DEFAULT_INPUT_RATIO[provider]
    return float(learned.calls or DEFAULT_CALLS)


def draws(key: str, tokens: Sequence[float], learned: Learned, provider: str) -> list[float]:
    """What each run (of packets of ``tokens``) draws on the ``key`` bucket, as widths are planned."""
    _seconds, _ratio, out, calls = run_profile(learned, provider)
    ratio = planning_ratio(learned, provider)
    per_token = {"input_tokens_per_minute": ratio}.get(key, 0.0)
    per_run = {"output_tokens_per_minute": out, "requests_per_minute": calls}.get(key, 0.0)
    return [max(1.0, t * per_token + per_run) for t in tokens]


def with_observed(limits: ResolvedLimits, learned: Learned) -> ResolvedLimits:
    """Limits read from the provider's own rate-limit headers win, at high confidence. A limit inferred from
    throttled usage lowers a configured one (a ceiling, never raised): throttling below it shows the key
    gets less than the configuration says."""
    if not learned.observed_limits and not learned.inferred_limits:
        return limits
    merged = dict(limits.limits)
    for key, value in learned.inferred_limits.items():
        old = merged.get(key)
        if old is not None and value > 0 and old.confidence == "medium" and value < old.value:
            merged[key] = Limit(value, f"{INFERRED_SOURCE} at {_stamp(learned.inferred_at)}", "medium")
    for key, value in learned.observed_limits.items():
        if key in merged and value > 0:
            merged[key] = Limit(value, f"rate-limit headers seen {_stamp(learned.observed_at)}", "high")
    return ResolvedLimits(limits.provider, limits.model, merged)


def _stamp(at: datetime | None) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if at else "earlier"
