"""Learning as evidence arrives: calibration, throttling as a rate, one correction per cause, slow start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from audit_mcp.scheduling.launch_pacing import PACING_UTILISATION, launch_interval, pacing_utilisation
from audit_mcp.scheduling.learning import (
    Context,
    RunOutcome,
    learn_failure,
    learn_run,
    learn_usage,
)
from audit_mcp.scheduling.limits import Limit, ResolvedLimits
from audit_mcp.scheduling.profile import Learned, run_profile
from audit_mcp.scheduling.scheduler import SLOW_START_WIDTH, PacketLoad, physical_cap, schedule
from audit_mcp.scheduling.sizefit import FIT_DECAY

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HIGH = (4_000, 2_000_000, 400_000)
MID = (1_000, 450_000, 90_000)
RATE_LIMITED = 'API Error: 429 {"type":"rate_limit_error"} retry-after: 45'


def limits(values: tuple[int, int, int], confidence: str = "medium", provider: str = "anthropic") -> ResolvedLimits:
    keys = ("requests_per_minute", "input_tokens_per_minute", "output_tokens_per_minute")
    table = {k: Limit(v, "test", confidence) for k, v in zip(keys, values, strict=True)}
    table["context_tokens"] = Limit(200_000, "test", confidence)
    table["output_tokens"] = Limit(16_000, "test", confidence)
    return ResolvedLimits(provider, "claude-test", table)


def context(lim: ResolvedLimits, in_use: float, mean: float = 20_000, host_cap: int = 16) -> Context:
    return Context(lim, host_cap, "rolling", mean, in_use)


def usage(calls: float = 20, limited: float = 0, seconds: float = 200, tokens: float = 40_000) -> dict[str, float]:
    return {"api_calls": calls, "rate_limited_calls": limited, "seconds": seconds, "input_tokens": tokens}


def test_the_input_ratio_is_calibrated_from_totals_not_a_mean_of_per_packet_ratios() -> None:
    # Small packets pay the same fixed overhead per call: a mean of ratios would say 4.5.
    ctx = context(limits(HIGH), 16)
    state = learn_usage(Learned(), usage(tokens=30_000), 10_000, NOW, ctx)
    state = learn_usage(state, usage(tokens=12_000), 2_000, NOW, ctx)
    assert state.input_ratio == pytest.approx((FIT_DECAY * 30_000 + 12_000) / (FIT_DECAY * 10_000 + 2_000))
    assert state.run_seconds == 200 and state.calls == 20


def _sized_usage(tokens: int) -> dict[str, float]:
    # Every call re-sends a fixed system prompt: a small packet's run charges far more per token of its text.
    calls = 6 + tokens / 4_000
    return {
        "api_calls": calls,
        "rate_limited_calls": 0,
        "seconds": 13 * calls,
        "input_tokens": 4_000 * calls + 6 * tokens,
        "output_tokens": 3_000 + 0.05 * tokens,
    }


def test_what_runs_take_is_learned_against_each_packets_size_so_launch_order_does_not_skew_it() -> None:
    # Packets launch longest first, so the last ones reported are the smallest. Learned against each packet's
    # own size, the profile read at a size (and the width it gives) is the same whichever order they came in,
    # and true at that size: the next run, which starts with its largest, is planned right.
    sizes = [40_000 - 1_500 * i for i in range(25)]  # 40k down to 4k: longest first
    ctx = context(limits(MID, provider="openai"), 16, mean=22_000)
    states = []
    for order in (sizes, sizes[::-1]):
        state = Learned()
        for tokens in order:
            state = learn_usage(state, _sized_usage(tokens), tokens, NOW, ctx)
        states.append(state)
    for tokens in (6_000, 22_000, 38_000):
        truth = _sized_usage(tokens)
        for state in states:
            seconds, ratio, output, calls = run_profile(state, "openai", tokens)
            assert ratio * tokens == pytest.approx(truth["input_tokens"], rel=0.03)
            assert seconds == pytest.approx(truth["seconds"], rel=0.03)
            assert calls == pytest.approx(truth["api_calls"], rel=0.03)
            assert output == pytest.approx(truth["output_tokens"], rel=0.03)
    lim = limits(MID, provider="openai")
    widths = [physical_cap(lim, 64, 22_000, state)[0] for state in states]
    assert widths[0] == pytest.approx(widths[1], rel=0.01)


def test_launch_pacing_keeps_a_margin_against_an_uncertain_calibration_that_shrinks_as_it_becomes_certain() -> None:
    key, sizes = "input_tokens_per_minute", [40_000 - 1_500 * i for i in range(25)]
    ctx = context(limits(MID, provider="openai"), 6, mean=22_000)
    certain, scattered = Learned(), Learned()
    for i, tokens in enumerate(sizes):
        exact = _sized_usage(tokens)
        certain = learn_usage(certain, exact, tokens, NOW, ctx)
        noisy = {**exact, "input_tokens": exact["input_tokens"] * (1.15 if i % 2 else 0.85)}
        scattered = learn_usage(scattered, noisy, tokens, NOW, ctx)
    # With nothing learned the draw is a prior's guess: the widest margin.
    assert pacing_utilisation(key, Learned(), 22_000) == PACING_UTILISATION
    # Runs that all draw what their size says leave nothing to guard against; runs that scatter keep more.
    assert pacing_utilisation(key, certain, 22_000, "openai") > 0.99
    assert PACING_UTILISATION < pacing_utilisation(key, scattered, 22_000, "openai") < 0.97
    # Cached runs read their packet early, in a peak their totals do not measure: they keep the margin.
    cached = Learned()
    for tokens in sizes:
        exact = _sized_usage(tokens)
        cached = learn_usage(cached, {**exact, "input_tokens": 4_000 + 1.2 * tokens}, tokens, NOW, ctx)
    assert pacing_utilisation(key, cached, 22_000, "anthropic") == PACING_UTILISATION
    # Launches are spaced by the draw over the share of the refill pacing plans for.
    lim = limits(MID, provider="openai")
    draw = run_profile(certain, "openai", 22_000)[1] * 22_000
    assert launch_interval(lim, certain, 22_000)[0] == pytest.approx(draw / 7_500, abs=0.2)


def test_packets_all_of_one_size_teach_a_ratio_that_reads_the_same_at_every_size() -> None:
    # Nothing shows how a quantity changes with size: the fit reads as a single ratio (and a single mean) did.
    ctx = context(limits(HIGH), 16)
    state = Learned()
    for _ in range(5):
        state = learn_usage(state, usage(tokens=60_000, seconds=240), 20_000, NOW, ctx)
    for tokens in (5_000, 20_000, 80_000):
        seconds, ratio, _output, calls = run_profile(state, "anthropic", tokens)
        assert ratio == pytest.approx(3.0) and seconds == pytest.approx(240) and calls == pytest.approx(20)


def test_usage_moves_the_physical_cap_as_it_arrives() -> None:
    lim = limits(MID)
    before, _ = physical_cap(lim, 16, 60_000, Learned())
    state = Learned()
    for _ in range(4):
        state = learn_usage(state, usage(tokens=60_000, seconds=240), 60_000, NOW, context(lim, before, 60_000))
    after, binding = physical_cap(lim, 16, 60_000, state)
    assert before == 15  # 7,500 tokens/s × 240 s / (60,000 × 2)
    assert after > before and binding == "host"


def test_a_trickle_of_429s_on_a_busy_key_never_narrows_a_healthy_run() -> None:
    # One refused call in 50 (2%), packet after packet, for an hour: under the share that means throttling.
    ctx, state = context(limits(HIGH), 16), Learned(cap=16.0, updated_at=NOW, threshold=16.0)
    for minute in range(60):
        state = learn_usage(state, usage(calls=50, limited=1), 20_000, NOW + timedelta(minutes=minute), ctx)
    assert state.cap == 16.0 and state.last_decrease_at is None and state.last_429_at is not None


def test_throttling_is_a_rate_of_refused_calls_and_one_decrease_answers_it() -> None:
    ctx, state = context(limits(HIGH), 8), Learned(cap=8.0, updated_at=NOW, threshold=8.0)
    state = learn_usage(state, usage(calls=20, limited=4), 20_000, NOW, ctx)  # 20%: throttled
    assert state.cap == 6.0 and state.cooldown_until is None  # a quarter off; the host already waited
    # Packets that started before that decrease ran at the old width: they say nothing about the new one.
    later = NOW + timedelta(seconds=60)
    for _ in range(5):
        state = learn_usage(state, usage(calls=20, limited=6, seconds=300), 20_000, later, context(limits(HIGH), 6))
    assert state.cap == pytest.approx(6.0, abs=0.01)  # (decaying back toward the physical cap meanwhile)
    # A packet that started after it and is still throttled takes the next quarter off.
    state = learn_usage(state, usage(calls=20, limited=6, seconds=30), 20_000, later, context(limits(HIGH), 6))
    assert state.cap == 4.5  # unrounded: the host keeps 4.5 running on average


def test_429s_the_calibration_explains_recalibrate_and_do_not_also_cut_the_cap() -> None:
    # The runs draw 16 tokens per packet token, not the prior's 2: the physical cap shrinks from that alone.
    lim = limits(MID)
    width, _ = physical_cap(lim, 16, 20_000, Learned())
    state = Learned()
    for _ in range(3):
        state = learn_usage(state, usage(calls=20, limited=5, tokens=320_000), 20_000, NOW, context(lim, width))
    assert state.cap is None and state.last_decrease_at == NOW and state.input_ratio == pytest.approx(16)
    assert physical_cap(lim, 16, 20_000, state)[0] < width
    # The same 429s at a width the calibrated profile sustains: the calibration cannot explain them.
    fine = Learned()
    for _ in range(3):
        fine = learn_usage(fine, usage(calls=20, limited=5, tokens=40_000), 20_000, NOW, context(lim, width))
    assert fine.cap == round(width * 0.75)


def test_a_rate_limited_failure_halves_the_cap_and_cools_down_once_per_run_length() -> None:
    ctx = context(limits(HIGH), 8)
    state = learn_failure(Learned(cap=8.0, updated_at=NOW, threshold=8.0), RATE_LIMITED, NOW, ctx)
    assert state.cap == 4.0 and state.cooldown_until == NOW + timedelta(seconds=45) and state.last_429_at == NOW
    # The other packets of the same wave fail moments later: one decrease answers them all.
    again = learn_failure(state, RATE_LIMITED, NOW + timedelta(seconds=20), context(limits(HIGH), 4))
    assert again.cap == pytest.approx(4.0, abs=0.01) and again.cooldown_until == NOW + timedelta(seconds=65)
    assert learn_failure(Learned(), "429 Too Many Requests", NOW, ctx).cooldown_until == NOW + timedelta(seconds=60)
    assert learn_failure(Learned(cap=1.0, updated_at=NOW), RATE_LIMITED, NOW, context(limits(HIGH), 1)).cap == 1.0


def test_a_limit_the_429_message_quotes_explains_the_429s() -> None:
    text = (
        'API Error: 429 {"error": {"type": "rate_limit_error", "message": "This request would exceed the rate '
        'limit for your organization of 30,000 input tokens per minute."}} retry-after: 30'
    )
    state = learn_failure(Learned(), text, NOW, context(limits(HIGH, "low"), SLOW_START_WIDTH * 4))
    assert state.observed_limits == {"input_tokens_per_minute": 30_000}
    assert state.cap is not None and state.cap == SLOW_START_WIDTH * 4  # explained: the quoted limit governs


def test_slow_start_doubles_per_clean_wave_until_the_first_decrease_then_adds_one_per_wave() -> None:
    guessed = limits(MID, "low")  # nothing configured or observed: only the built-in table's guess
    assert schedule(guessed, Learned(), 16, "rolling", [PacketLoad("P", 20_000)] * 2, NOW).slow_start
    state, width, at = Learned(), SLOW_START_WIDTH, NOW
    for _ in range(2):  # two clean waves, each launched at the width the last one earned
        at += timedelta(seconds=300)
        for _ in range(width):
            state = learn_usage(state, usage(seconds=200), 20_000, at, context(guessed, width))
        width = round(state.cap or 0)
    assert width == SLOW_START_WIDTH * 4
    state = learn_failure(state, RATE_LIMITED, at, context(guessed, width))
    assert state.cap == width / 2 == state.threshold
    at += timedelta(seconds=300)
    for _ in range(4):  # one clean wave above the threshold: one more
        state = learn_usage(state, usage(seconds=200), 20_000, at, context(guessed, 4))
    assert state.cap == pytest.approx(5.0, abs=0.1)


def test_clean_packets_that_started_before_the_cap_grew_prove_nothing_about_the_new_width() -> None:
    # A rolling host's feedback arrives a run length late: the packets still finishing ran two wide.
    state = Learned(cap=2.0, updated_at=NOW)
    for _ in range(2):
        state = learn_usage(state, usage(seconds=200), 20_000, NOW, context(limits(HIGH, "low"), 2))
    assert state.cap == 4.0 and state.round_at == NOW
    for _ in range(6):
        state = learn_usage(
            state, usage(seconds=200), 20_000, NOW + timedelta(seconds=60), context(limits(HIGH, "low"), 4)
        )
    assert state.cap == pytest.approx(4.0, abs=0.01)


def test_a_clean_wave_narrower_than_the_cap_does_not_widen_it() -> None:
    state = learn_usage(Learned(cap=8.0, updated_at=NOW, threshold=2.0), usage(), 20_000, NOW, context(limits(HIGH), 2))
    assert state.cap == 8.0


def test_the_cap_grows_no_further_than_the_physical_cap() -> None:
    state = Learned(cap=4.0, updated_at=NOW)
    for _ in range(10):
        state = learn_usage(state, usage(), 20_000, NOW, context(limits(HIGH), 4, host_cap=4))
    assert state.cap == 4.0


def test_a_hard_stop_is_kept_until_a_packet_succeeds() -> None:
    ctx = context(limits(HIGH), 4)
    stopped = learn_failure(Learned(), '429 {"error": {"message": "enforced_spend_limit_reached"}}', NOW, ctx)
    assert schedule(limits(HIGH), stopped, 4, "rolling", [PacketLoad("P", 1_000)], NOW).blocked is not None
    assert learn_usage(stopped, usage(), 20_000, NOW + timedelta(hours=1), ctx).hard_stop is None


def test_a_merged_run_counts_itself_clean_or_rate_limited_and_learns_only_failures_not_learned_yet() -> None:
    ctx = context(limits(HIGH), 4)
    clean = learn_run(Learned(), RunOutcome(4, 4, 4, 0, calls=80), NOW, ctx)
    assert (clean.clean_runs, clean.rate_limited_runs) == (1, 0)
    learned_before = learn_failure(Learned(cap=4.0, updated_at=NOW), RATE_LIMITED, NOW, ctx)
    merged = learn_run(learned_before, RunOutcome(4, 4, 3, 1, failures=()), NOW, context(limits(HIGH), 2))
    assert merged.cap == 2.0 and merged.rate_limited_runs == 1  # the failure was not counted twice
    absorbed = learn_run(Learned(), RunOutcome(4, 4, 4, 0, absorbed=2, calls=80), NOW, ctx)
    assert absorbed.clean_runs == 1  # 2 of 80 calls is a busy key's noise


def test_a_width_throttled_again_and_again_is_probed_ever_less_often() -> None:
    lim = limits(HIGH, "high")  # known from the provider: the cap, not a limit, is what the 429s correct
    state = Learned(cap=8.0, updated_at=NOW, threshold=8.0)
    at = NOW

    def lasting(in_use: float) -> Context:  # a half-life long enough that the cap does not decay meanwhile
        return Context(lim, 16, "rolling", 20_000, in_use, timedelta(days=3650))

    def throttled(state: Learned, in_use: float) -> Learned:
        nonlocal at
        at += timedelta(seconds=100)
        return learn_usage(state, usage(calls=20, limited=20, seconds=30), 20_000, at, lasting(in_use))

    def clean_packets(state: Learned, n: int) -> Learned:
        nonlocal at
        for _ in range(n):
            at += timedelta(seconds=100)
            state = learn_usage(state, usage(seconds=30), 20_000, at, lasting(state.cap or 1))
        return state

    state = throttled(state, 8)  # a quarter off, unrounded
    assert state.cap == pytest.approx(6.0) and state.throttled_width == 8 and state.throttled_repeats == 0
    state = clean_packets(state, 6 + 7)  # a clean wave of six, then of seven: back to eight
    assert state.cap == pytest.approx(8.0, abs=0.05) and state.throttled_width == 8
    state = throttled(state, state.cap)  # eight is throttled again: now twice the clean waves before trying it
    assert state.cap == pytest.approx(6.0, abs=0.05) and state.throttled_repeats == 1
    state = clean_packets(state, 6 + 2 * 7 - 1)
    assert state.cap == pytest.approx(7.0, abs=0.05)
    state = clean_packets(state, 1)
    assert state.cap == pytest.approx(8.0, abs=0.05)
    # A width throttled more than half a run away starts the count again.
    state = throttled(state, 4)
    assert state.throttled_width == 4 and state.throttled_repeats == 0


def test_a_width_that_comes_back_clean_is_forgotten_as_throttled() -> None:
    lim = limits(HIGH, "high")
    state = Learned(cap=2.0, updated_at=NOW, threshold=2.0, throttled_width=3, throttled_repeats=0)
    at = NOW
    for _ in range(5):  # a clean wave at two grows to three; a clean wave at three grows past it
        at += timedelta(seconds=100)
        state = learn_usage(state, usage(seconds=30), 20_000, at, context(lim, state.cap or 1))
    assert round(state.cap or 0) == 4 and state.throttled_width is None and state.throttled_repeats == 0


def test_throttled_usage_infers_an_input_limit_only_below_a_configured_one() -> None:
    # Four runs of 100,000 charged tokens (five times their 20,000-token packets: every call re-sends the
    # context) over 200 s each: 120,000 a minute together.
    throttled = usage(calls=20, limited=4, seconds=200, tokens=100_000)
    configured = learn_usage(Learned(), throttled, 20_000, NOW, context(limits(HIGH), 4))
    assert configured.inferred_limits == {"input_tokens_per_minute": 120_000}
    # Above what is configured it proves nothing new (the ceiling stays); a provider's own limit is the truth;
    # a built-in guess is left to the learned cap.
    low = limits((4_000, 100_000, 400_000))
    assert learn_usage(Learned(), throttled, 20_000, NOW, context(low, 4)).inferred_limits == {}
    assert learn_usage(Learned(), throttled, 20_000, NOW, context(limits(HIGH, "high"), 4)).inferred_limits == {}
    assert learn_usage(Learned(), throttled, 20_000, NOW, context(limits(HIGH, "low"), 4)).inferred_limits == {}
    # Cached runs (charged twice their packet) draw it early: their mean draw says nothing about the bucket.
    cached = usage(calls=20, limited=4, seconds=200, tokens=40_000)
    assert learn_usage(Learned(), cached, 20_000, NOW, context(limits(HIGH), 4)).inferred_limits == {}
