"""One subagent run as the scheduler sees it: the learned state, the run profile, and the binding rates.

A run re-sends its context on every call, so what it draws on each bucket is its packet's tokens times
an input ratio (plus output tokens and calls per run). The priors below are corrected by observed
``usage`` blocks; only limits known with medium or high confidence bind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from audit_mcp.scheduling.limits import Limit, ResolvedLimits
from audit_mcp.scheduling.sizefit import Fit, mean_size, reading, value_at

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
# How a built-in guess is shown once throttling bore it out (``learning._corroborated``): it binds from then on.
CORROBORATED_SOURCE = "built-in table, borne out by throttled runs"
OBSERVED_SOURCE = "rate-limit headers"  # how a limit a provider's headers or 429 message quoted is shown
PER_MINUTE = ("input_tokens_per_minute", "output_tokens_per_minute", "requests_per_minute")
FIT_KEYS = ("input_tokens", "output_tokens", "api_calls", "seconds")  # the usage a run profile is fitted on
PROBE = "provider probe"  # the teacher of limits the provider itself answered (trusted, as configuration is)
# One audit's claim past the bounds a single audit may teach (``claims``): kind (a limit's key, ``inferred:`` and
# a key, or ``wait``), teacher (a digest of the audit's repository identity), value (a limit; for a wait, its
# end in epoch seconds), and when it was made (epoch seconds).
Claim = tuple[str, str, float, float]


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
    throttled_width: float | None = None
    throttled_repeats: int = 0
    round_at: datetime | None = None
    round_clean: int = 0
    # Calls and rate-limited calls reported in ``usage``, decayed with time: throttling is judged as a rate.
    window_calls: float = 0.0
    window_limited: float = 0.0
    window_at: datetime | None = None
    # What runs took against their packets' estimated tokens (``sizefit``), per usage key (``FIT_KEYS``): read
    # at the size being planned. The scalars above are the same fits read at the mean size they have seen.
    size_fits: dict[str, Fit] = field(default_factory=dict)
    # Charged input tokens and seconds the same usage reported, decayed alongside the calls.
    window_input: float = 0.0
    window_seconds: float = 0.0
    # Per-minute limits inferred from throttled usage (the width in use times what each run drew while the
    # bucket refused calls): a bucket that throttles runs delivers its refill, so that is the limit. Lower only.
    inferred_limits: dict[str, int] = field(default_factory=dict)
    inferred_at: datetime | None = None
    # Built-in guesses (low confidence, which never bind) that throttling bore out: runs were refused at about
    # the width the guess allows, so it binds (medium) from then on, for one half-life (``lapsed``).
    corroborated_limits: dict[str, int] = field(default_factory=dict)
    corroborated_at: datetime | None = None
    # The whole-wave burst bound in force (whole runs per wave, ``scheduler.held_runs``): it moves only once
    # its estimate leaves it by a margin, so drift of a few percent in the run profile keeps the width.
    burst_runs: int | None = None
    # The most runs at once (the capacity the host was told) that a packet came back clean at: a built-in guess
    # that allows far fewer was refuted by it, whatever throttling comes later (``learning._corroborated``).
    clean_width: float | None = None
    # The teachers (audits, by a digest of their repository's identity; ``PROBE`` for the provider itself) behind
    # each observed and inferred limit: one, or several that corroborated a claim past one audit's bounds.
    observed_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    inferred_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Each teacher's latest observed value of each limit (the last few teachers): what is known without one
    # teacher's word is what the others observed, so no teacher lowers a limit step by step past its bound.
    observations: dict[str, dict[str, int]] = field(default_factory=dict)
    # Claims past the bounds one audit may teach, held until another audit corroborates them (``claims``).
    claims: tuple[Claim, ...] = ()

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


def run_profile(learned: Learned, provider: str = "", tokens: float | None = None) -> tuple[float, float, float, float]:
    """Seconds, input ratio, output tokens and calls of one subagent run of a ``tokens``-token packet: learned
    (read off the size fits at that size; without a size, at the mean size they have seen), else the priors."""
    ratio = learned.input_ratio or DEFAULT_INPUT_RATIO.get(provider, UNCACHED_INPUT_RATIO)
    seconds = learned.run_seconds or DEFAULT_RUN_SECONDS
    out = learned.output_tokens or DEFAULT_OUTPUT_TOKENS
    calls = learned.calls or DEFAULT_CALLS
    if tokens is None or tokens <= 0:
        return seconds, ratio, out, calls
    fits = learned.size_fits
    if learned.input_ratio and "input_tokens" in fits:
        ratio = max(1e-6, value_at(fits["input_tokens"], tokens, proportional=True) / tokens)
    return (
        _at(fits, "seconds", tokens, seconds) if learned.run_seconds else seconds,
        ratio,
        _at(fits, "output_tokens", tokens, out) if learned.output_tokens else out,
        _at(fits, "api_calls", tokens, calls) if learned.calls else calls,
    )


def _at(fits: dict[str, Fit], key: str, tokens: float, otherwise: float) -> float:
    fit = fits.get(key)
    return max(1.0, value_at(fit, tokens)) if fit is not None and mean_size(fit) > 0 else otherwise


def binding_rates(limits: ResolvedLimits) -> dict[str, float]:
    """Refill per second of each limit known well enough to bind.

    A guessed (low-confidence) tier would throttle every better-off user; learning from 429s narrows instead.
    """
    return {key: limits.value(key) / 60.0 for key in PER_MINUTE if limits.limits[key].confidence != "low"}


def planning_ratio(learned: Learned, provider: str, tokens: float | None = None) -> float:
    """The input ratio widths and launch pacing are planned with at a packet of ``tokens``: the learned one;
    before any usage, for a provider that charges cache reads, the prior; for one that charges every input
    token, the most a run can draw, each of its calls re-sending the whole packet (the prior's guess at how
    much less it re-sends varies with the packet, the model and the tools: a first wave planned on it may
    outrun the bucket)."""
    if learned.input_ratio:
        return run_profile(learned, provider, tokens)[1]
    if provider in DEFAULT_INPUT_RATIO:
        return DEFAULT_INPUT_RATIO[provider]
    return float(learned.calls or DEFAULT_CALLS)


def draws(key: str, tokens: Sequence[float], learned: Learned, provider: str) -> list[float]:
    """What each run (of packets of ``tokens``) draws on the ``key`` bucket, as widths are planned: each at
    its own packet's size (``run_profile``, read off the size fits in one pass)."""
    fitted = {"input_tokens_per_minute": "input_tokens", "output_tokens_per_minute": "output_tokens"}
    fitted["requests_per_minute"] = "api_calls"
    if key not in fitted:
        return [1.0 for _ in tokens]
    scalar = {"input_tokens_per_minute": learned.input_ratio, "output_tokens_per_minute": learned.output_tokens}
    fit = learned.size_fits.get(fitted[key])
    if key == "input_tokens_per_minute":
        if fit is None or not learned.input_ratio or mean_size(fit) <= 0:
            ratio = planning_ratio(learned, provider)
            return [max(1.0, t * ratio) for t in tokens]
        intercept, slope = reading(fit, proportional=True)
        return [max(1.0, intercept + slope * t, 1e-6 * t) for t in tokens]
    _seconds, _ratio, out, calls = run_profile(learned, provider)
    per_run = out if key == "output_tokens_per_minute" else calls
    learned_value = scalar.get(key, learned.calls)
    if fit is None or not learned_value or mean_size(fit) <= 0:
        return [max(1.0, per_run) for _ in tokens]
    intercept, slope = reading(fit)
    return [max(1.0, intercept + slope * t) for t in tokens]


def durations(tokens: Sequence[float], learned: Learned, provider: str) -> list[float]:
    """How long each run (of packets of ``tokens``) is expected to take: the seconds fit read at each packet's
    size in one pass (``run_profile`` one at a time), else the mean."""
    seconds = run_profile(learned, provider)[0]
    fit = learned.size_fits.get("seconds")
    if fit is None or not learned.run_seconds or mean_size(fit) <= 0:
        return [seconds for _ in tokens]
    intercept, slope = reading(fit)
    return [max(1.0, intercept + slope * t) for t in tokens]


def with_observed(limits: ResolvedLimits, learned: Learned) -> ResolvedLimits:
    """Limits read from the provider's own rate-limit headers win, at high confidence. A limit inferred from
    throttled usage lowers a configured one (a ceiling, never raised): throttling below it shows the key
    gets less than the configuration says."""
    if not learned.observed_limits and not learned.inferred_limits and not learned.corroborated_limits:
        return limits
    merged = dict(limits.limits)
    for key, value in learned.inferred_limits.items():
        old = merged.get(key)
        if old is not None and value > 0 and old.confidence == "medium" and value < old.value:
            by = support(learned.inferred_by.get(key, ()))
            merged[key] = Limit(value, f"{INFERRED_SOURCE} at {_stamp(learned.inferred_at)} ({by})", "medium")
    for key, value in learned.corroborated_limits.items():
        old = merged.get(key)
        # Only the guess that was borne out: a different guess (another model's table, a new release's) is not.
        if old is not None and old.confidence == "low" and value == old.value:
            merged[key] = Limit(value, f"{CORROBORATED_SOURCE} at {_stamp(learned.corroborated_at)}", "medium")
    for key, value in learned.observed_limits.items():
        if key in merged and value > 0:
            by = support(learned.observed_by.get(key, ()))
            merged[key] = Limit(value, f"{OBSERVED_SOURCE} seen {_stamp(learned.observed_at)} ({by})", "high")
    return ResolvedLimits(limits.provider, limits.model, merged)


def support(teachers: tuple[str, ...]) -> str:
    """Who stands behind a learned value, for its source: the provider itself, one audit, or several."""
    if PROBE in teachers:
        return "read from the provider"
    return "one audit" if len(teachers) <= 1 else f"corroborated by {len(teachers)} audits"


def lapsed(learned: Learned, now: datetime, half_life: timedelta) -> Learned:
    """``learned`` without the guesses throttling bore out more than ``half_life`` ago: a tier-one key binds
    again at its next throttled window, while one whose account has moved up a tier is not held to the guess
    for ever (a bound guess is never throttled, so nothing else would ever lift it)."""
    at = learned.corroborated_at
    if not learned.corroborated_limits or (at is not None and now - at < half_life):
        return learned
    return replace(learned, corroborated_limits={}, corroborated_at=None)


def _stamp(at: datetime | None) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if at else "earlier"
