"""What a run takes as a function of its packet's size, learned from each packet against its own size.

Packets launch longest first, so the last packets a run reports are its smallest. A single input ratio or a
mean run length learned from them in arrival order ends skewed toward small packets (their fixed per-call
overhead, the system prompt and tools re-sent on every call, makes their ratio high; their runs are short),
and the next run, which starts with its largest, is planned on it. So each quantity a packet's ``usage``
reports (charged input tokens, output tokens, calls, seconds) is fitted as ``y = a + b·x`` over the packets'
estimated tokens ``x``: least squares over sums decayed per packet (``FIT_DECAY``), read at the size being
planned. Which packets were learned first then changes nothing but the weights.

The slope is shrunk toward what a single learned value said, as far as the sizes seen fail to spread (a
prior worth ``PRIOR_SPREAD`` packets one mean size apart): the proportional slope ``ȳ/x̄`` for a quantity
that was a ratio to the packet's tokens (charged input), none for one that was a mean per run (seconds,
calls, output tokens). A fit over packets of nearly one size says nothing about another size, and reads as
the ratio or the mean did; over packets of many sizes it follows them.

The same sums say how far the packets scatter around the line, hence how sure a reading is
(``relative_error``): launch pacing keeps a margin under a bucket's refill against the error of the draw it
planned with, and that margin shrinks as the calibration becomes certain.

Pure: a fit is six floats (the decayed weight and the sums of ``x``, ``x²``, ``y``, ``x·y`` and ``y²``),
kept in the learned state.
"""

from __future__ import annotations

import math

Fit = tuple[float, float, float, float, float, float]  # weight, Σw·x, Σw·x², Σw·y, Σw·x·y, Σw·y²

FIT_DECAY = 0.95  # how much of the sums each new packet keeps: about the last 20 packets count
PRIOR_SPREAD = 0.1  # the slope's prior (the proportional one) weighs as much as this many packets' spread


def folded(fit: Fit | None, x: float, y: float, keep: float = FIT_DECAY) -> Fit:
    """``fit`` with one more packet of ``x`` tokens that took ``y``."""
    w, sx, sxx, sy, sxy, syy = fit or (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    return (keep * w + 1.0, keep * sx + x, keep * sxx + x * x, keep * sy + y, keep * sxy + x * y, keep * syy + y * y)


def seeded(x: float, y: float) -> Fit:
    """A fit holding one packet: what a single learned value (a ratio, a mean) says at the size ``x``."""
    return folded(None, x, y)


def mean_size(fit: Fit) -> float:
    """The weighted mean packet size the fit has seen."""
    return fit[1] / fit[0] if fit[0] > 0 else 0.0


def mean_value(fit: Fit) -> float:
    """The weighted mean of the quantity: what a mean learned in any order would say."""
    return fit[3] / fit[0] if fit[0] > 0 else 0.0


def value_at(fit: Fit, x: float, proportional: bool = False) -> float:
    """The quantity a packet of ``x`` tokens takes, as the fit reads it (never below zero); ``proportional``:
    with sizes that do not spread, it grows in proportion to the size (a ratio), else it stays the mean."""
    intercept, slope = reading(fit, proportional)
    return max(0.0, intercept + slope * x)


def reading(fit: Fit, proportional: bool = False) -> tuple[float, float]:
    """The fitted line as (intercept, slope): ``value_at`` is ``max(0, intercept + slope·x)``, for reading
    many sizes at once."""
    line = _line(fit, proportional)
    if line is None:
        return 0.0, 0.0
    return line[1] - line[2] * line[0], line[2]


def relative_error(fit: Fit, x: float, proportional: bool = False) -> float | None:
    """The standard error of the fit's reading at ``x``, as a share of the reading: the packets' scatter
    around the line over the weight behind it, growing away from the sizes seen. None below three packets'
    weight, where nothing yet says how they scatter."""
    w, syy = fit[0], fit[5]
    line = _line(fit, proportional)
    if line is None or w < 3:
        return None
    xm, ym, slope, spread, covariance, prior = line
    scatter = max(0.0, syy - w * ym * ym)  # Σw·(y − ȳ)²
    residual = max(0.0, scatter - 2 * slope * covariance + slope * slope * spread) / (w - 2)
    reading = max(0.0, ym + slope * (x - xm))
    if reading <= 0:
        return None
    return math.sqrt(residual * (1 / w + (x - xm) ** 2 / (spread + prior))) / reading


def _line(fit: Fit, proportional: bool) -> tuple[float, float, float, float, float, float] | None:
    """x̄, ȳ, the slope, Σw·(x − x̄)², Σw·(x − x̄)·(y − ȳ) and the prior's weight; None when empty."""
    w, sx, sxx, sy, sxy, _syy = fit
    if w <= 0:
        return None
    xm, ym = sx / w, sy / w
    if xm <= 0:
        return (xm, ym, 0.0, 0.0, 0.0, 0.0)
    spread = max(0.0, sxx - w * xm * xm)
    covariance = sxy - w * xm * ym
    prior = PRIOR_SPREAD * xm * xm
    slope = max(0.0, (covariance + prior * (ym / xm if proportional else 0.0)) / (spread + prior))
    return (xm, ym, slope, spread, covariance, prior)
