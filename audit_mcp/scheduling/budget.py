"""How many tokens a packet may take: the context, the configured cap, and what the limits sustain.

A run re-sends its context on every call, so one run of a large packet can draw input faster than the
bucket refills however narrow the wave. ``packet_token_budget`` keeps a packet small enough that one
run's charged input (its text times the input ratio) fits what the bucket refills over the run, above a
floor below which the per-call overhead costs more than it saves; where every input token is charged and
the input limit sets the width, no larger than ``UNCACHED_PACKET_TOKENS``, since each call re-sends the
whole packet.
"""

from __future__ import annotations

from audit_mcp.scheduling import profile
from audit_mcp.scheduling.limits import MAX_WAVE_WIDTH, ResolvedLimits
from audit_mcp.scheduling.profile import CACHED_RATIO, Learned, binding_rates, run_profile

UNCACHED_PACKET_TOKENS = 20_000  # with every input token charged, packets stay this small when input binds
PACKET_UTILISATION = 0.85  # one run alone stays this far inside the input refill
PESSIMISTIC_FIRST_CALL = 1.25  # the first call carries the packet text plus the system prompt and tools
# Smaller packets add calls, each re-sending the system prompt and tools: below this the overhead costs more
# input than a slower run would.
MIN_SUSTAINABLE_PACKET = 8_000
MIN_PACKET_BUDGET = 8_000  # the first-call bound never packs smaller than this either


def admissible_tokens(limits: ResolvedLimits) -> int | None:
    """The largest packet whose first call fits the input bucket; None unless the limit is known well enough."""
    itpm = limits.limits["input_tokens_per_minute"]
    if itpm.confidence == "low":
        return None
    return int(itpm.value / PESSIMISTIC_FIRST_CALL)


def sustainable_packet_tokens(limits: ResolvedLimits, learned: Learned) -> int | None:
    """The largest packet one run can review without drawing input faster than the bucket refills.

    A run charges about ``tokens × input_ratio`` over ``run_seconds``; at ``PACKET_UTILISATION`` of the
    input rate that allows ``rate × seconds × utilisation / ratio`` tokens, never below
    ``MIN_SUSTAINABLE_PACKET``. None unless the input limit is known (medium or high). Requests and output
    tokens per run do not shrink with the packet, so those limits bound the width, not the packet.
    """
    rate = binding_rates(limits).get("input_tokens_per_minute")
    if rate is None:
        return None
    seconds, ratio, _out, _calls = run_profile(learned, limits.provider)
    return max(MIN_SUSTAINABLE_PACKET, int(rate * seconds * PACKET_UTILISATION / ratio))


def packet_token_budget(limits: ResolvedLimits, learned: Learned, max_packet_tokens: int, host_cap: int) -> int:
    """Tokens a packet may take: the context, the configured cap, the input bucket, a run's sustainable draw,
    and, where every input token is charged and the input limit binds (or throttling showed it does),
    ``UNCACHED_PACKET_TOKENS``."""
    budget = budget_before_uncached_cap(limits, learned, max_packet_tokens)
    if _uncached_input_binds(limits, learned, budget, host_cap):
        # Every call re-sends the whole context, so a run's input grows with the square of its packet:
        # smaller packets review the same code for fewer input tokens, down to where the system prompt
        # re-sent on every call dominates. Where the host's slots bind instead, fewer and larger packets
        # make fewer calls, and that is what counts.
        budget = min(budget, UNCACHED_PACKET_TOKENS)
    return budget


def budget_before_uncached_cap(limits: ResolvedLimits, learned: Learned, max_packet_tokens: int) -> int:
    budget = min(limits.packet_budget, max_packet_tokens)
    if (fit := admissible_tokens(limits)) is not None:
        # A packet whose first call cannot fit the input bucket would never be admitted: pack smaller.
        budget = min(budget, max(MIN_PACKET_BUDGET, fit))
    if (run := sustainable_packet_tokens(limits, learned)) is not None:
        budget = min(budget, run)
    return budget


def _uncached_input_binds(limits: ResolvedLimits, learned: Learned, budget: int, host_cap: int) -> bool:
    """Whether every input token is charged and packets of ``budget`` tokens leave the input limit, not the
    host's slots, setting the width.

    With the input limit unknown, the evidence is the runs' own: usage showed every input token charged (a
    learned ratio of ``CACHED_RATIO`` or more) and throttling cut the width below the host's (a decrease
    left a threshold there). Slow start alone leaves none, so a model never throttled keeps large packets.
    """
    seconds, ratio, _out, _calls = run_profile(learned, limits.provider)
    if ratio < CACHED_RATIO:
        return False
    slots = min(host_cap, MAX_WAVE_WIDTH)
    rate = binding_rates(limits).get("input_tokens_per_minute")
    if rate is None:
        return learned.input_ratio is not None and learned.threshold is not None and learned.threshold < slots
    return profile.TARGET_UTILISATION * rate * seconds / (budget * ratio) < slots
