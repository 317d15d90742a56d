"""The pure wave scheduler: widths, cooldowns, order, AIMD and decay, as tables."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from audit_mcp.scheduling.budget import packet_token_budget, sustainable_packet_tokens
from audit_mcp.scheduling.launch_pacing import launch_offsets, slot_offsets
from audit_mcp.scheduling.learned import LearnedStore
from audit_mcp.scheduling.learning import Context, learn_usage
from audit_mcp.scheduling.limits import Limit, ResolvedLimits, waves_for
from audit_mcp.scheduling.live import replan
from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.scheduler import SLOW_START_WIDTH, PacketLoad, physical_cap, schedule

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAY = timedelta(hours=24)
HIGH = (4_000, 2_000_000, 400_000)
MID = (1_000, 450_000, 90_000)
LOW = (50, 30_000, 8_000)


def limits(rpm: int, itpm: int, otpm: int, confidence: str = "medium", provider: str = "anthropic") -> ResolvedLimits:
    values = {
        "context_tokens": 200_000,
        "output_tokens": 16_000,
        "requests_per_minute": rpm,
        "input_tokens_per_minute": itpm,
        "output_tokens_per_minute": otpm,
    }
    return ResolvedLimits(provider, "claude-test", {k: Limit(v, "test", confidence) for k, v in values.items()})


def packets(n: int, tokens: int = 20_000) -> list[PacketLoad]:
    return [PacketLoad(f"P{i:02d}", tokens + i) for i in range(n)]


@pytest.mark.parametrize(
    ("tier", "host_cap", "n", "tokens", "expected"),
    [
        (HIGH, 20, 40, 20_000, 16),  # host-bound (16 at most): a rolling host keeps 16 running
        (HIGH, 4, 10, 20_000, 4),  # host-bound
        (HIGH, 3, 2, 20_000, 2),  # fewer packets than slots
        (MID, 16, 30, 20_000, 16),  # small packets: still host-bound
        (MID, 16, 30, 80_000, 12),  # input-token bound: 7,500/s × 240 s / (80,000 × 2) = 11.25, in 12 slots
        (LOW, 16, 10, 20_000, 3),  # a low tier sustains three runs at a time
    ],
    ids=["high-tier-claude-code", "high-tier-cursor", "two-packets", "mid-tier-small", "mid-tier-large", "low-tier"],
)
def test_wave_size_is_the_tightest_of_host_and_limits(
    tier: tuple[int, int, int], host_cap: int, n: int, tokens: int, expected: int
) -> None:
    result = schedule(limits(*tier), Learned(), host_cap, "rolling", packets(n, tokens), NOW)
    assert result.wave_size == expected and result.dispatch_mode == "rolling"
    assert expected - 1 < min(result.capacity, n) <= expected  # the slots the capacity needs, none idle
    assert sum(result.waves) == n and result.waves[:-1] == [expected] * (len(result.waves) - 1)
    assert result.wave_size <= min(host_cap, 16)
    assert str(expected) in result.reasoning


@pytest.mark.parametrize(
    ("kind", "n", "cap", "waves"),
    [
        ("rolling", 20, 16, [16, 4]),  # 16 run at once; the last 4 start as slots free
        ("whole_wave", 20, 16, [10, 10]),  # a wave waits for its slowest: two even waves
        ("rolling", 25, 16, [16, 9]),
        ("whole_wave", 25, 16, [13, 12]),
        ("rolling", 3, 16, [3]),
        ("whole_wave", 3, 16, [3]),
    ],
    ids=["rolling-20", "whole-wave-20", "rolling-25", "whole-wave-25", "rolling-few", "whole-wave-few"],
)
def test_only_whole_waves_are_balanced(kind: str, n: int, cap: int, waves: list[int]) -> None:
    result = schedule(limits(*HIGH), Learned(), cap, kind, packets(n), NOW)
    assert result.waves == waves and result.wave_size == waves[0] and result.dispatch_mode == kind
    assert ("keeps that many running" in result.reasoning) is (kind == "rolling")


def test_packets_launch_largest_first() -> None:
    result = schedule(limits(*HIGH), Learned(), 4, "rolling", packets(5), NOW)
    assert result.order == ["P04", "P03", "P02", "P01", "P00"]
    assert result.estimated_wave_tokens == sum(20_000 + i for i in (4, 3, 2, 1))  # four at once, then one


def test_a_learned_cap_narrows_the_wave_and_decays_back_toward_the_limits() -> None:
    learned = Learned(cap=2.0, updated_at=NOW)
    assert schedule(limits(*HIGH), learned, 16, "rolling", packets(32), NOW).wave_size == 2
    day_later = schedule(limits(*HIGH), learned, 16, "rolling", packets(32), NOW + DAY)
    assert day_later.learned_cap == 9  # halfway from 2 back to 16
    assert day_later.wave_size == 9 and day_later.forecast.paced_by == "learned_cap"
    assert schedule(limits(*HIGH), learned, 16, "rolling", packets(32), NOW + 10 * DAY).wave_size == 16


def test_an_active_cooldown_is_carried_and_an_expired_one_is_dropped() -> None:
    learned = Learned(cooldown_until=NOW + timedelta(seconds=90))
    assert schedule(limits(*HIGH), learned, 4, "rolling", packets(4), NOW).cooldown_until == NOW + timedelta(seconds=90)
    assert schedule(limits(*HIGH), learned, 4, "rolling", packets(4), NOW + DAY).cooldown_until is None


@pytest.mark.parametrize(("confidence", "oversize"), [("low", []), ("medium", ["P00"]), ("high", ["P00"])])
def test_packets_too_big_for_the_input_bucket_are_flagged_only_when_limits_are_known(
    confidence: str, oversize: list[str]
) -> None:
    result = schedule(limits(50, 30_000, 8_000, confidence), Learned(), 4, "rolling", [PacketLoad("P00", 28_000)], NOW)
    assert result.oversize == oversize


def test_a_whole_wave_host_gets_a_narrower_wave_when_cached_runs_read_their_packets_at_once() -> None:
    # A run of a 60k-token packet draws 120k over 240 s. Rolling: 7,500/s × 240 s / 120k = 15. A whole wave
    # reads its packets within the first 160 s: the 450k burst plus 7,500/s × 160 s admits 13.75 of them: each
    # wave must fit it, so 13 (a wave of 14 after one of 13 would find the bucket no fuller).
    rolling, _ = physical_cap(limits(*MID), 16, 60_000, Learned(), "rolling")
    whole, binding = physical_cap(limits(*MID), 16, 60_000, Learned(), "whole_wave")
    assert (rolling, whole, binding) == (15, 13, "input_tokens_per_minute")
    # Where the burst is small against the refill over a run, the wave is held to what the reading time admits:
    # 24k-token packets draw 48k each; 500/s × 240 s sustains 2.5 (3 slots, launch pacing holding the draw to
    # the refill), but 30k + 500/s × 160 s = 110k admits 2.29 runs reading at once: 2 in every wave.
    low = limits(4_000, 30_000, 400_000)
    assert physical_cap(low, 16, 24_000, Learned(), "rolling") == (2.5, "input_tokens_per_minute")
    assert physical_cap(low, 16, 24_000, Learned(), "whole_wave") == (2, "input_tokens_per_minute")
    # Uncached, every call re-sends the whole context: the draw is even, and the wave as wide as a rolling one.
    # Before any usage, a run is taken to re-send its whole packet on each of its ~15 calls: 7,500/s × 240 s
    # / (20,000 × 15) = 6; once usage says it draws 8× its packet, 11.25.
    uncached = limits(*MID, provider="openai")
    assert physical_cap(uncached, 16, 20_000, Learned(), "whole_wave") == (6, "input_tokens_per_minute")
    assert physical_cap(uncached, 16, 20_000, Learned(), "rolling") == (6, "input_tokens_per_minute")
    measured = Learned(input_ratio=8.0)
    assert physical_cap(uncached, 16, 20_000, measured, "whole_wave") == (11.25, "input_tokens_per_minute")


# A low tier, cached: 24k-token packets draw 30k each (ratio 1.25), so a wave fits 30k + 500/s × seconds / 1.5
# of reading, i.e. 1 + seconds / 90 runs: 2.94 at 175 s, 3.03 at 183 s, 3.22 at 200 s.
@pytest.mark.parametrize(
    ("seconds", "held", "expected"),
    [
        (183, None, 3),  # nothing in force yet: rounded down
        (183, 2, 2),  # 3.03 is within the margin over 3: the two in force stay
        (200, 2, 3),  # 3.22 clears it: a run is added
        (175, 3, 2),  # under 3: a run is dropped at once (the bucket would refuse the third)
        (175, 2, 2),
    ],
    ids=["unset", "within-margin", "past-margin", "below", "steady"],
)
def test_a_whole_wave_burst_bound_moves_up_only_once_its_estimate_clears_a_margin(
    seconds: int, held: int | None, expected: int
) -> None:
    learned = Learned(run_seconds=seconds, input_ratio=1.25, burst_runs=held)
    assert physical_cap(limits(*LOW, confidence="high"), 4, 24_000, learned, "whole_wave") == (
        expected,
        "input_tokens_per_minute",
    )


def test_runs_stretched_by_a_few_seconds_do_not_add_a_run_to_every_wave() -> None:
    # Waves of 2 in force (runs of 175 s: 2.94 fit the burst). Three runs come back 190 s long, each with one
    # refused call its retry absorbed (a busy key): the estimate creeps over 3, where rounding down alone would
    # now send waves of 3 into a bucket that fits 3 only just.
    lim = limits(*LOW, confidence="high")
    ctx = Context(lim, 4, "whole_wave", 24_000.0, 2.0)
    use = {"input_tokens": 30_000, "output_tokens": 3_000, "api_calls": 12, "rate_limited_calls": 0}
    state = learn_usage(Learned(run_seconds=175, input_ratio=1.25), {**use, "seconds": 175}, 24_000, NOW, ctx)
    assert state.burst_runs == 2
    for i in range(3):
        at = NOW + timedelta(seconds=200 * (i + 1))
        state = learn_usage(state, {**use, "seconds": 190, "rate_limited_calls": 1}, 24_000, at, ctx)
    assert physical_cap(lim, 4, 24_000, replace(state, burst_runs=None), "whole_wave")[0] == 3  # it crept over
    assert state.burst_runs == 2
    assert schedule(lim, state, 4, "whole_wave", packets(8, 24_000), NOW + DAY).waves == [2, 2, 2, 2]
    # Runs that really take longer move it: the estimate clears the margin, and the waves grow.
    for i in range(6):
        at = NOW + timedelta(seconds=1_000 + 250 * i)
        state = learn_usage(state, {**use, "seconds": 240}, 24_000, at, ctx)
    assert state.burst_runs == 3
    assert schedule(lim, state, 4, "whole_wave", packets(9, 24_000), NOW + DAY).waves == [3, 3, 3]


def test_the_burst_bound_in_force_survives_the_learned_state_file(tmp_path: Path) -> None:
    store = LearnedStore(tmp_path / "learned.sqlite3")
    store.update("anthropic/claude-test", lambda s: replace(s, burst_runs=2, run_seconds=183.0), NOW)
    assert LearnedStore(tmp_path / "learned.sqlite3").get("anthropic/claude-test").burst_runs == 2


@pytest.mark.parametrize("kind", ["rolling", "whole_wave"])
def test_the_forecast_counts_packets_waves_tokens_and_a_time_range(kind: str) -> None:
    result = schedule(limits(*HIGH), Learned(), 4, kind, packets(10), NOW)
    f = result.forecast
    assert (f.packets, f.waves) == (10, 3)
    assert f.estimated_input_tokens > sum(p.estimated_tokens for p in packets(10))
    assert 0 < f.seconds_low < f.seconds_high


def test_with_nothing_known_the_first_wave_starts_narrow_instead_of_trusting_the_built_in_table() -> None:
    result = schedule(limits(*LOW, confidence="low"), Learned(), 16, "rolling", packets(32), NOW)
    assert result.physical_cap == 16 and result.wave_size == SLOW_START_WIDTH and result.slow_start
    assert result.forecast.paced_by == "slow_start" and "slow start" in result.forecast.pace
    assert "limits yet (none configured, observed or learned)" in result.reasoning
    assert "AUDIT_MCP_ITPM" in result.reasoning
    # A guess never holds the host back once anything is learned, or a limit is configured.
    taught = Learned(run_seconds=200.0, clean_runs=1)
    wide = schedule(limits(*LOW, confidence="low"), taught, 16, "rolling", packets(32), NOW)
    assert wide.wave_size == 16 and not wide.slow_start and "slow start" not in wide.reasoning
    told = schedule(limits(*LOW), Learned(), 16, "rolling", packets(4), NOW)
    assert not told.slow_start and "not known yet" not in told.reasoning


@pytest.mark.parametrize(
    ("source", "confidence", "configured"),
    [
        ("session config [model]", "medium", True),
        ("environment AUDIT_MCP_ITPM", "medium", True),
        ("headers", "high", False),
    ],
    ids=["config", "environment", "observed"],
)
def test_the_forecast_says_when_a_configured_limit_not_the_model_sets_the_pace(
    source: str, confidence: str, configured: bool
) -> None:
    values = {k: Limit(v.value, source, confidence) for k, v in limits(*MID).limits.items()}
    result = schedule(ResolvedLimits("anthropic", "m", values), Learned(), 16, "rolling", packets(30, 80_000), NOW)
    assert result.forecast.paced_by == "input_tokens_per_minute"
    assert ("a configured limit is a ceiling" in result.forecast.pace) is configured
    assert ("raise it if the account allows more" in result.reasoning) is configured
    host = schedule(limits(*HIGH), Learned(), 4, "rolling", packets(30), NOW).forecast
    assert host.paced_by == "host" and "slot" in host.pace


@pytest.mark.parametrize(("confidence", "token_bound"), [("low", False), ("medium", True)])
def test_the_forecast_is_held_back_by_token_rates_only_when_they_are_known(confidence: str, token_bound: bool) -> None:
    f = schedule(limits(*LOW, confidence=confidence), Learned(), 16, "rolling", packets(16), NOW).forecast
    by_tokens = f.estimated_input_tokens / (LOW[1] / 60)
    assert (f.seconds_low >= int(by_tokens)) is token_bound


def test_the_launch_offsets_play_the_input_bucket_forward() -> None:
    # Only the input bucket binds: each run draws 2 × 10,000 tokens against a 30,000 burst refilled at 0.9 × 500/s.
    lim = limits(100_000, 30_000, 10_000_000)
    offsets = launch_offsets(lim, Learned(), [10_000] * 5, 5)
    assert offsets == [0.0, 0.0, 22.2, 66.7, 111.1]


@pytest.mark.parametrize(
    ("tier", "confidence", "paced"),
    [
        (HIGH, "medium", False),  # the host's slots bind first: everything starts at once
        (LOW, "low", False),  # a guessed tier never paces
        (LOW, "medium", True),
        (LOW, "high", True),
    ],
    ids=["high-tier", "guessed-low-tier", "configured-low-tier", "low-tier-from-headers"],
)
def test_launches_are_paced_only_when_a_known_limit_binds(
    tier: tuple[int, int, int], confidence: str, paced: bool
) -> None:
    result = schedule(limits(*tier, confidence=confidence), Learned(), 4, "rolling", packets(12, 10_000), NOW)
    assert len(result.launch_offsets) == len(result.order)
    assert result.launch_offsets == sorted(result.launch_offsets) and result.launch_offsets[0] == 0
    assert any(result.launch_offsets) is paced
    assert (result.launch_interval_seconds > 0) is paced
    assert ("apart" in result.reasoning or "about every" in result.reasoning) is paced


def test_the_launch_interval_is_the_steady_gap_between_starts() -> None:
    result = schedule(
        limits(100_000, 30_000, 10_000_000),
        Learned(),
        16,
        "rolling",
        [PacketLoad(f"P{i:02d}", 10_000) for i in range(8)],
        NOW,
    )
    gaps = [b - a for a, b in zip(result.launch_offsets, result.launch_offsets[1:], strict=False)]
    assert result.launch_interval_seconds == pytest.approx(20_000 / (0.9 * 500), abs=0.1)
    assert gaps[-1] == pytest.approx(result.launch_interval_seconds, abs=0.2)
    assert "2 may start at once" in result.reasoning


def test_a_run_too_hungry_for_the_input_bucket_on_its_own_is_called_out() -> None:
    lim = ResolvedLimits("openai", "gpt-test", limits(*LOW).limits)  # every input token is charged
    result = schedule(lim, Learned(), 4, "rolling", packets(4, 18_000), NOW)
    assert "one run alone draws" in result.reasoning
    assert "one run alone draws" not in schedule(limits(*MID), Learned(), 4, "rolling", packets(4), NOW).reasoning


def test_a_single_slot_is_never_paced() -> None:
    # One run at a time already keeps to the bucket's pace; holding the next back only leaves it idle.
    assert launch_offsets(limits(100_000, 30_000, 10_000_000), Learned(), [10_000] * 5, 1) == [0.0] * 5


def test_a_zero_limit_neither_paces_nor_divides_by_zero() -> None:
    result = schedule(limits(0, 0, 0), Learned(), 4, "rolling", packets(6), NOW)
    assert result.launch_offsets == [0.0] * 6 and result.wave_size == 1 and result.forecast.seconds_high > 0


@pytest.mark.parametrize(
    ("tier", "confidence", "provider", "learned", "expected"),
    [
        (LOW, "medium", "openai", Learned(), 12_750),  # 500/s × 240 s × 0.85 / 8
        (LOW, "medium", "anthropic", Learned(), 51_000),  # cache reads are free: ratio 2
        (LOW, "high", "openai", Learned(run_seconds=120, input_ratio=10), 8_000),  # 5,100 → the floor
        (LOW, "medium", "openai", Learned(run_seconds=300, input_ratio=5), 25_500),
        (MID, "medium", "openai", Learned(), 191_250),
        (LOW, "low", "openai", Learned(), None),  # a guessed tier binds nothing
        ((50, 0, 8_000), "medium", "openai", Learned(), 8_000),  # nothing is admitted: the floor, no division
    ],
    ids=[
        "low-uncached-priors",
        "low-cached-priors",
        "learned-hungry-runs-floor",
        "learned-slow-runs",
        "mid-uncached",
        "guessed-limits",
        "zero-input-limit",
    ],
)
def test_a_packet_is_sized_so_one_run_draws_input_no_faster_than_it_refills(
    tier: tuple[int, int, int], confidence: str, provider: str, learned: Learned, expected: int | None
) -> None:
    assert sustainable_packet_tokens(limits(*tier, confidence, provider), learned) == expected


@pytest.mark.parametrize(
    ("tier", "provider", "configured", "host_cap", "expected"),
    [
        (LOW, "openai", 60_000, 16, 12_750),  # the sustainable draw binds
        (LOW, "anthropic", 60_000, 16, 24_000),  # the first call must fit the input bucket: 30k / 1.25
        (LOW, "openai", 10_000, 16, 10_000),  # the configured cap binds
        (HIGH, "anthropic", 60_000, 16, 60_000),
        (MID, "openai", 60_000, 16, 20_000),  # input binds and every call re-sends everything: smaller costs less
        (MID, "openai", 60_000, 3, 60_000),  # three slots bind first: fewer, larger packets make fewer calls
        (HIGH, "openai", 60_000, 16, 60_000),  # the host's slots bind
        (HIGH, "anthropic", 500_000, 16, 150_000),  # the context window, less the reviewer's room
    ],
    ids=[
        "low-uncached",
        "low-cached",
        "configured",
        "high-tier",
        "mid-uncached",
        "mid-uncached-narrow-host",
        "high-uncached",
        "context",
    ],
)
def test_the_packet_budget_is_the_tightest_of_context_config_first_call_and_run_draw(
    tier: tuple[int, int, int], provider: str, configured: int, host_cap: int, expected: int
) -> None:
    assert packet_token_budget(limits(*tier, provider=provider), Learned(), configured, host_cap) == expected


def test_throttled_uncached_runs_pack_small_even_before_the_input_limit_is_known() -> None:
    guessed = limits(*MID, confidence="low", provider="openai")  # the built-in table: nothing binds
    assert packet_token_budget(guessed, Learned(), 60_000, 16) == 60_000
    # Every input token charged, but never throttled (slow start leaves no threshold): large packets stay.
    calibrated = Learned(input_ratio=16.0, cap=4.0)
    assert packet_token_budget(guessed, calibrated, 60_000, 16) == 60_000
    # Throttling cut the width below the host's: input binds, and each call re-sends the whole packet.
    throttled = Learned(input_ratio=16.0, cap=3.0, threshold=3.0)
    assert packet_token_budget(guessed, throttled, 60_000, 16) == 20_000
    assert packet_token_budget(guessed, throttled, 60_000, 3) == 60_000  # the host's three slots bind first
    cached = Learned(input_ratio=2.0, cap=3.0, threshold=3.0)  # cache reads free: the packet's size hardly matters
    assert packet_token_budget(limits(*MID, confidence="low"), cached, 60_000, 16) == 60_000


def test_a_capacity_that_is_not_whole_paces_its_last_slot_or_mixes_wave_sizes() -> None:
    # 2.5 runs at once: a rolling host keeps three slots and spaces the starts so that, once the first two
    # are out, one starts per run length / 2.5; a whole-wave host alternates waves of three and two.
    assert waves_for(20, 2.5, "rolling") == [3] * 6 + [2]
    assert waves_for(20, 2.5, "whole_wave") == [3, 2] * 4
    assert waves_for(25, 16, "whole_wave") == [13, 12]  # a whole capacity: balanced as before
    assert slot_offsets(3.0, [100.0] * 6) == [0.0] * 6  # whole: the slots alone pace
    starts = slot_offsets(2.5, [100.0] * 8)
    assert starts[:2] == [0.0, 0.0] and starts[2] == pytest.approx(20.0)
    assert [b - a for a, b in itertools.pairwise(starts[2:])] == pytest.approx([40.0] * 5)
    # Over a long run that is 2.5 runs at once on average, in the three slots the plan gives.
    learned = Learned(cap=2.5, updated_at=NOW, threshold=2.5)
    result = schedule(limits(*HIGH), learned, 16, "rolling", packets(40, 20_000), NOW)
    assert (result.wave_size, result.capacity) == (3, 2.5) and result.launch_interval_seconds > 0
    last = result.launch_offsets[-1]
    assert 40 * 240 / (last + 240) == pytest.approx(2.5, rel=0.02)  # 40 runs of 240 s, the last ends at last + 240
    whole = schedule(limits(*HIGH), learned, 16, "whole_wave", packets(40, 20_000), NOW)
    assert whole.waves == [3, 2] * 8 and whole.capacity == 2.5
    # A capacity within a few percent of a whole number is that number: no slot paced for a sliver of time.
    near = schedule(
        limits(*HIGH), Learned(cap=2.98, updated_at=NOW, threshold=2.98), 16, "rolling", packets(9, 20_000), NOW
    )
    assert near.capacity == 3.0 and not any(near.launch_offsets)


def test_a_run_in_flight_paces_the_packets_still_waiting_from_where_it_stands() -> None:
    # The cap fell to 1.5 while twelve packets had gone out at a wider width. Paced from the run's start, the
    # thirteenth would wait as if all twelve had gone out at 1.5 (about 1,900 s in); from where the run stands
    # (1,200 s in, two running, so no slot-seconds to spare) it starts one run length / 1.5 later, and the rest
    # one every 160 s.
    learned = Learned(cap=1.5, updated_at=NOW, threshold=1.5)
    loads = packets(20, 20_000)
    order = schedule(limits(*HIGH), learned, 16, "rolling", loads, NOW).order
    waiting = set(order[12:])
    from_start = replan(limits(*HIGH), learned, 16, "rolling", loads, waiting, NOW)
    live = replan(limits(*HIGH), learned, 16, "rolling", loads, waiting, NOW, elapsed=1_200.0, running=2)
    assert from_start.offsets[order[12]] > 1_800
    starts = [live.offsets[pid] for pid in live.waiting]
    assert starts[0] == pytest.approx(1_200 + 240 / 1.5, abs=0.1)
    assert [b - a for a, b in itertools.pairwise(starts)] == pytest.approx([160.0] * 7, abs=0.1)
    assert (live.width, live.capacity) == (2, 1.5)
