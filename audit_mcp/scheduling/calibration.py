"""What one packet's usage says about runs: each quantity fitted against the packet's size, and whether the run
met rate limits at all.

Pure. A packet's ``usage`` moves the run profile, each quantity (charged input, output tokens, calls and, for
packets that met no rate limit, seconds) fitted against that packet's own estimated tokens (``sizefit``):
packets launch longest first, and a ratio or mean learned in arrival order would end on the smallest (whose
fixed per-call overhead inflates their ratio) and plan the next run's largest with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.sizefit import Fit, folded, mean_size, mean_value, seeded

# A run is clean with at most one refused call, or a share of its calls under this: several times the 0.5-2%
# of calls a busy shared key sees refused at random (``learning`` judges a throttled window by it too).
THROTTLED_SHARE = 0.05


def clean(usage: Mapping[str, float]) -> bool:
    """A run that met no more rate limits than a busy key's noise: at most one refused call, or a share of
    its calls under ``THROTTLED_SHARE``."""
    limited = float(usage.get("rate_limited_calls") or 0.0)
    return limited <= max(1.0, THROTTLED_SHARE * float(usage.get("api_calls") or 0.0))


def calibrated(state: Learned, usage: Mapping[str, float], estimated_tokens: int) -> Learned:
    """Each quantity the usage reports, folded into its size fit against this packet's own estimated tokens
    (seconds only from a clean run: retries stretch them); the scalars are the fits read at their mean size."""
    x = float(estimated_tokens)
    if x <= 0:
        return state
    reported = {
        "input_tokens": float(usage.get("input_tokens") or 0.0),
        "output_tokens": float(usage.get("output_tokens") or 0.0),
        "api_calls": float(usage.get("api_calls") or 0.0),
        "seconds": float(usage.get("seconds") or 0.0) if clean(usage) else 0.0,
    }
    fits = dict(state.size_fits)
    for key, y in reported.items():
        if y <= 0:
            continue
        fit = fits.get(key)
        if fit is None and (old := _scalar(state, key)) is not None:  # a profile learned before size fits existed
            fit = seeded(x, old * x if key == "input_tokens" else old)
        fits[key] = folded(fit, x, y)
    ratio = fits.get("input_tokens")
    return replace(
        state,
        size_fits=fits,
        input_ratio=mean_value(ratio) / mean_size(ratio) if ratio and mean_size(ratio) > 0 else state.input_ratio,
        output_tokens=_mean(fits, "output_tokens", state.output_tokens),
        calls=_mean(fits, "api_calls", state.calls),
        run_seconds=_mean(fits, "seconds", state.run_seconds),
    )


def _scalar(state: Learned, key: str) -> float | None:
    return {
        "input_tokens": state.input_ratio,
        "output_tokens": state.output_tokens,
        "api_calls": state.calls,
        "seconds": state.run_seconds,
    }[key]


def _mean(fits: Mapping[str, Fit], key: str, otherwise: float | None) -> float | None:
    fit = fits.get(key)
    return mean_value(fit) if fit is not None else otherwise
