"""One subagent run as the scheduler sees it: the learned state, the run profile, and the binding rates.

A run re-sends its context on every call, so what it draws on each bucket is its packet's tokens times
an input ratio (plus output tokens and calls per run). The priors below are corrected by observed
``usage`` blocks; only limits known with medium or high confidence bind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from audit_mcp.scheduling.limits import ResolvedLimits

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


def decayed_cap(learned: Learned, prior: float, now: datetime, half_life: timedelta) -> float | None:
    """The learned cap pulled back toward ``prior`` by the time since it was learned."""
    if learned.cap is None or learned.updated_at is None:
        return None
    elapsed = max(0.0, (now - learned.updated_at).total_seconds())
    weight: float = 0.5 ** (elapsed / max(1.0, half_life.total_seconds()))
    return prior + (learned.cap - prior) * weight


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


def draws(key: str, tokens: Sequence[float], learned: Learned, provider: str) -> list[float]:
    """What each run (of packets of ``tokens``) draws on the ``key`` bucket."""
    _seconds, ratio, out, calls = run_profile(learned, provider)
    per_token = {"input_tokens_per_minute": ratio}.get(key, 0.0)
    per_run = {"output_tokens_per_minute": out, "requests_per_minute": calls}.get(key, 0.0)
    return [max(1.0, t * per_token + per_run) for t in tokens]
