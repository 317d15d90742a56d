"""Launch pacing within a run: each packet's earliest start, seconds after the run's first launch.

Pure. Each bucket a known limit sets is played forward as a virtual token bucket, so the runs draw on it no
faster than it refills (``launch_offsets``, with a margin against the calibration's error,
``pacing_utilisation``); where the capacity is not a whole number of runs and no bucket sets it (a learned
cap), the starts are spaced by slot-seconds so the last slot is used only part of the time
(``slot_offsets``); a whole-wave host launches each wave at its first packet's start (``by_wave``).
"""

from __future__ import annotations

from collections.abc import Sequence

from audit_mcp.scheduling.limits import ResolvedLimits
from audit_mcp.scheduling.profile import CACHED_RATIO, Learned, binding_rates, draws, run_profile
from audit_mcp.scheduling.sizefit import relative_error

# Launch pacing keeps each bucket's draw under its refill by a margin against the error of the draw it was
# planned with: ``PACING_CONFIDENCE`` standard errors of the calibration's reading (``sizefit``), and never
# less utilisation than ``PACING_UTILISATION``, the margin while the draw is a prior's guess.
PACING_UTILISATION = 0.9
PACING_CONFIDENCE = 2.0
_FITTED = {"input_tokens_per_minute": "input_tokens", "output_tokens_per_minute": "output_tokens"}
_FITTED["requests_per_minute"] = "api_calls"
SLOT_PACER = "slots"  # what sets the launch interval where the capacity's last slot is paced, not a bucket


def slot_offsets(capacity: float, seconds: Sequence[float], start: float = 0.0, running: int = 0) -> list[float]:
    """Earliest starts (seconds after a run's first launch, in launch order) that hold a rolling host's mean
    concurrency to a capacity that is not whole: the capacity rounded up in slots, the last used only part
    of the time. A virtual bucket of slot-seconds refills at ``capacity`` per second and holds ``capacity``
    runs of the mean length; a run starts once the bucket holds its expected seconds (``profile.durations``),
    which it then takes. From ``start`` with ``running`` runs going (a run in flight), the bucket holds what
    the slots they leave free would: the runs launched before count by what is running now, not by the
    pace of a capacity they were not launched at. All zeros for a whole capacity, where the slots alone pace."""
    offsets = [0.0] * len(seconds)
    if not seconds or float(capacity).is_integer():
        return offsets
    mean = sum(seconds) / len(seconds)
    burst = capacity * mean
    level, at = min(burst, max(0.0, capacity - running) * mean), start
    for i, length in enumerate(seconds):
        start = at if level >= length else at + (length - level) / capacity
        level = min(burst, level + capacity * (start - at)) - length
        offsets[i], at = start, start
    return offsets


def launch_offsets(
    limits: ResolvedLimits,
    learned: Learned,
    tokens: Sequence[int],
    width: int,
    not_before: Sequence[float] | None = None,
) -> list[float]:
    """Seconds after a run starts before which each of its packets (in launch order) should not start, at the
    earliest ``not_before`` (``slot_offsets``: the buckets are played forward from the starts it sets).

    Each bucket known well enough to bind is played forward as a virtual token bucket that refills at
    ``pacing_utilisation`` of its rate and charges a run's whole draw at its start: runs start at once
    while the burst lasts (less one output reservation and one request per slot), then no faster than
    the bucket refills, so first calls do not collide and the throughput stays just under the limit.
    All zeros when nothing binds, and at a width of one: a single slot already runs one packet at a time, and
    holding the next back only leaves the bucket full and idle.
    """
    offsets = list(not_before) if not_before is not None else [0.0] * len(tokens)
    if width <= 1:
        return [round(x, 1) for x in offsets]
    for key, rate in binding_rates(limits).items():
        if rate <= 0:  # nothing is ever admitted: the width of one already says so
            continue
        headroom = {
            "output_tokens_per_minute": width * limits.value("output_tokens"),
            "requests_per_minute": width,
        }.get(key, 0)
        burst = max(0.0, limits.value(key) - headroom)
        refill = pacing_utilisation(key, learned, sum(tokens) / len(tokens), limits.provider) * rate
        level, at = burst, 0.0
        for i, draw in enumerate(draws(key, tokens, learned, limits.provider)):
            start = offsets[i] if offsets[i] > at else at
            level += refill * (start - at)
            level = burst if level > burst else level
            if level < 0:  # a run starts once the runs before it are paid for
                start -= level / refill
                level = 0.0
            offsets[i], at = start, start
            level -= draw
    return [round(x, 1) for x in offsets]


def pacing_utilisation(key: str, learned: Learned, tokens: float, provider: str = "") -> float:
    """The share of the ``key`` bucket's refill launch pacing plans to draw, for runs of ``tokens``-token
    packets. Runs that re-send their whole context on every call draw evenly, so pacing, which charges a
    run's whole draw at its start, is only as wrong as the draw it planned with: the calibration's reading,
    less ``PACING_CONFIDENCE`` of its standard errors, is what the refill must cover, and the margin shrinks
    as the calibration becomes certain, down to none. Cached runs (cache reads free) draw their packet as
    they read it, early, in a peak their totals do not measure: they keep ``PACING_UTILISATION``, as does
    any run while its draw is a prior's guess (or fewer than three packets were learned)."""
    fit = learned.size_fits.get(_FITTED.get(key, ""))
    if fit is None or not learned.input_ratio or run_profile(learned, provider, tokens)[1] < CACHED_RATIO:
        return PACING_UTILISATION
    error = relative_error(fit, tokens, proportional=key == "input_tokens_per_minute")
    if error is None:
        return PACING_UTILISATION
    return max(PACING_UTILISATION, 1.0 / (1.0 + PACING_CONFIDENCE * error))


def by_wave(offsets: list[float], waves: list[int]) -> list[float]:
    """One earliest start per wave, its first packet's: a whole-wave host launches a wave in one batch, and
    staggering inside it would only hold the wave (and the one after it) back by its last member."""
    out: list[float] = []
    for size in waves:
        out += [offsets[len(out)]] * size
    return out


def launch_interval(limits: ResolvedLimits, learned: Learned, mean_tokens: float) -> tuple[float, str | None]:
    """Seconds between starts once the burst is spent, and the bucket that sets them; (0, None) if none binds."""
    gaps = {
        key: draws(key, [mean_tokens], learned, limits.provider)[0]
        / (pacing_utilisation(key, learned, mean_tokens, limits.provider) * rate)
        for key, rate in binding_rates(limits).items()
        if rate > 0
    }
    key = max(gaps, key=lambda k: gaps[k], default=None)
    return (round(gaps[key], 1), key) if key is not None else (0.0, None)
