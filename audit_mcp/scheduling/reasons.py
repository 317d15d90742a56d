"""Why a schedule is as wide as it is, in words: the reasoning a dispatch plan carries and the pace its
forecast names (including when a configured limit, not the model, sets it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from audit_mcp.scheduling import budget
from audit_mcp.scheduling.budget import (
    MIN_PACKET_BUDGET,
    admissible_tokens,
    budget_before_uncached_cap,
    packet_token_budget,
    sustainable_packet_tokens,
)
from audit_mcp.scheduling.limits import ResolvedLimits
from audit_mcp.scheduling.profile import CORROBORATED_SOURCE, INFERRED_SOURCE, Learned, binding_rates, run_profile

_CONFIGURED = ("session config", "environment")


@dataclass(frozen=True)
class Facts:
    """What a schedule was computed from and what it came to."""

    limits: ResolvedLimits
    learned: Learned
    host_cap: int
    host_kind: str
    width: int
    physical_cap: int
    binding: str
    learned_cap: int | None
    decayed: float | None
    slow: bool
    paced_by: str
    offsets: list[float]
    interval: float
    pacer: str | None
    mean_tokens: float
    capacity: float
    max_packet_tokens: int | None
    cooldown: datetime | None
    oversize: list[str]


def configured(limits: ResolvedLimits, key: str) -> bool:
    """Whether the limit was set by the user (session config or environment), not observed or guessed."""
    return key in limits.limits and limits.limits[key].source.startswith(_CONFIGURED)


def pace(f: Facts) -> str:
    """What sets the width, in a sentence; a configured limit is named as such."""
    if f.paced_by == "packets":
        return f"the {f.width} packet(s) of the run: fewer than the slots"
    if f.paced_by == "slow_start":
        return f"slow start: nothing is known about the model's limits yet, so the width starts at {f.width}"
    if f.paced_by == "learned_cap":
        return f"the width learned from rate-limit errors ({f.capacity:.3g} at once on average)"
    if f.paced_by == "host":
        return f"the host's {min(f.host_cap, f.width if f.width else f.host_cap)} slot(s)"
    limit = f.limits.limits[f.paced_by]
    if configured(f.limits, f.paced_by):
        return (
            f"the configured {f.paced_by} ({limit.value:,}, {limit.source}), not the model: a configured "
            "limit is a ceiling and is obeyed as given; raise it if the account allows more"
        )
    if limit.source.startswith(INFERRED_SOURCE):
        return (
            f"the {f.paced_by} the throttled runs showed ({limit.value:,}, {limit.source}): lower than configured, "
            "since calls were refused while the configured limit said they fit"
        )
    if limit.source.startswith(CORROBORATED_SOURCE):
        return (
            f"the model's {f.paced_by} from the built-in table ({limit.value:,}, {limit.source}): calls were refused "
            "at about the width it allows, so it is obeyed for one learning half-life ([scheduler] half_life_hours); "
            "if the account allows more, set the real limit under [model] in .audit-mcp.toml (or AUDIT_MCP_RPM, "
            "AUDIT_MCP_ITPM, AUDIT_MCP_OTPM)"
        )
    return f"the model's {f.paced_by} ({limit.value:,}, {limit.source})"


def reasoning(f: Facts) -> str:
    seconds, ratio, _out, _calls = run_profile(f.learned, f.limits.provider, f.mean_tokens)
    how = (
        "keeps that many running, starting the next as one finishes"
        if f.host_kind == "rolling"
        else ("waits for each whole wave")
    )
    why = [
        f"host allows {f.host_cap} at once ({f.host_kind}: it {how})",
        f"the limits sustain {f.physical_cap} (bound by {f.binding}, runs of ~{seconds:.0f}s)",
    ]
    if f.slow:
        why.append(
            f"slow start: nothing is known about the model's limits yet (none configured, observed or learned), "
            f"so the first wave is {f.width} wide and each clean wave doubles it; the first 429 message that "
            "quotes a limit is learned, or set them under [model] in .audit-mcp.toml (or AUDIT_MCP_RPM, "
            "AUDIT_MCP_ITPM, AUDIT_MCP_OTPM)"
        )
    elif f.learned_cap is not None and f.decayed is not None:
        why.append(f"learned cap {f.learned.cap:.1f} decays to {f.decayed:.1f} toward {f.physical_cap}")
    if not f.capacity.is_integer():
        why.append(_fraction(f))
    if f.paced_by in f.limits.limits and configured(f.limits, f.paced_by):
        why.append(f"the pace is set by {pace(f)}")
    if f.interval and f.host_kind == "whole_wave":
        why.append(
            f"later waves wait for their launch_offsets (each wave's earliest start, in seconds after the "
            f"first launch) so runs draw on {f.pacer} no faster than it refills"
        )
    elif f.interval and f.pacer == "slots":
        first = sum(1 for x in f.offsets if x == 0)
        why.append(
            f"{first} may start at once, then one about every {f.interval:g}s (launch_offsets gives each "
            f"packet's earliest start, in seconds after the first launch) so that {f.capacity:.2f} run at once "
            "on average"
        )
    elif f.interval:
        first = sum(1 for x in f.offsets if x == 0)
        why.append(
            f"{first} may start at once, then one about every {f.interval:g}s (launch_offsets gives each "
            f"packet's earliest start, in seconds after the first launch) so runs draw on {f.pacer} no faster "
            "than it refills"
        )
    why += _packet_bounds(f, seconds, ratio)
    if f.cooldown is not None:
        why.append(
            f"cooling down until {f.cooldown.astimezone(UTC).isoformat(timespec='seconds').replace('+00:00', 'Z')}"
        )
    if f.oversize:
        why.append(f"{len(f.oversize)} packet(s) exceed a token bucket")
    if f.learned.hard_stop:
        why.append(f"hard stop: {f.learned.hard_stop}")
    return f"wave size {f.width}: " + "; ".join(why) + "."


def _fraction(f: Facts) -> str:
    """How a capacity that is not a whole number of runs is kept."""
    low, high = int(f.capacity), int(f.capacity) + 1
    if f.host_kind == "whole_wave":
        return f"{f.capacity:.2f} runs at once on average: waves of {high} and {low} alternate"
    return (
        f"{f.capacity:.2f} runs at once on average: {high} slots, with launch_offsets spacing the starts so the "
        "last slot is used only part of the time"
    )


def _packet_bounds(f: Facts, seconds: float, ratio: float) -> list[str]:
    """Which bound sized the packets, and a warning when one run alone outruns the input bucket."""
    why = []
    limits, learned = f.limits, f.learned
    sustainable = sustainable_packet_tokens(limits, learned)
    fit = admissible_tokens(limits)  # known exactly when ``sustainable`` is: both need the input limit
    if (
        sustainable is not None
        and fit is not None
        and sustainable < min(limits.packet_budget, max(MIN_PACKET_BUDGET, fit))
    ):
        why.append(
            f"packets are kept to ~{sustainable:,} tokens so that one run draws input_tokens_per_minute "
            "no faster than it refills"
        )
    cap = f.max_packet_tokens
    if cap is not None and packet_token_budget(limits, learned, cap, f.host_cap) < (
        budget_before_uncached_cap(limits, learned, cap)
    ):  # only the uncached bound does that
        why.append(
            f"packets are kept to ~{budget.UNCACHED_PACKET_TOKENS:,} tokens: every call re-sends the whole context "
            "(cache reads are charged), so smaller packets review the same code for fewer input tokens"
        )
    rate = binding_rates(limits).get("input_tokens_per_minute")
    if rate and f.mean_tokens * ratio > rate * seconds:
        why.append(
            f"one run alone draws ~{f.mean_tokens * ratio / seconds * 60:,.0f} input tokens a minute, more "
            "than the limit: expect rate-limit retries at any width"
        )
    return why
