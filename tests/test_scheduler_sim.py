"""The benchmark's simulator: no simulated audit finishes before the lower bound, whatever the strategy."""

from __future__ import annotations

import random

import pytest

from benchmarks.scheduler_sim import (
    CODE_TOKENS_PER_SLOT,
    PRIOR_FACTORS,
    TIERS,
    Provider,
    Scenario,
    code,
    lone_run_outruns,
    lower_bound,
    pack,
    run_packets,
    simulate,
    workload,
)


def _cases() -> list[Scenario]:
    rng = random.Random(7)
    return [
        Scenario(
            tier,
            rng.choice((3, 4, 6, 20)),
            rng.choice(("rolling", "whole_wave")),
            rng.choice(PRIOR_FACTORS),
            rng.choice(("cached", "uncached")),
            seed,
            10 * CODE_TOKENS_PER_SLOT,
            rng.choice(("table", "config")),
        )
        for seed, tier in enumerate(list(TIERS) * 8)
    ]


@pytest.mark.parametrize("strategy", ["scheduler", "naive", "oracle"])
def test_every_simulated_makespan_is_at_least_the_lower_bound(strategy: str) -> None:
    for sc in _cases():
        outcome = simulate(sc, strategy, warm=strategy == "scheduler")
        assert outcome.makespan >= outcome.lower_bound * (1 - 1e-9), sc
        assert outcome.calls > 0 and outcome.unfinished_files == 0


def test_the_simulated_host_counts_each_packet_s_rate_limited_calls_for_its_usage() -> None:
    packets = workload(random.Random(3), 6, 20_000, 2_000, cached=False)
    result = run_packets(Provider(TIERS["low"], 2_000), packets, 6, "rolling", 0.0)
    assert result.rate_limited > 0
    assert sum(result.throttled.values()) == result.rate_limited
    assert set(result.throttled) <= {p.packet_id for p in packets}


def test_the_lower_bound_is_the_longest_run_when_nothing_else_binds() -> None:
    packets = workload(random.Random(1), 3, budget=20_000, max_tokens=4_096, cached=True)
    bound = lower_bound(packets, (1_000_000, 10**9, 10**9), cap=20, kind="rolling")
    assert bound == max(p.duration for p in packets)


def test_a_whole_wave_host_waits_for_each_wave_s_slowest_packet() -> None:
    packets = workload(random.Random(2), 6, budget=20_000, max_tokens=4_096, cached=True)
    durations = sorted((p.duration for p in packets), reverse=True)
    bound = lower_bound(packets, (1_000_000, 10**9, 10**9), cap=3, kind="whole_wave")
    assert bound == pytest.approx(max(durations[0] + durations[3], sum(durations) / 3))


@pytest.mark.parametrize("kind", ["rolling", "whole_wave"])
def test_a_simulated_host_starts_no_packet_before_its_launch_offset(kind: str) -> None:
    packets = workload(random.Random(3), 2, budget=20_000, max_tokens=4_096, cached=True)
    provider = Provider((1_000_000, 10**9, 10**9), 4_096)
    late = packets[1].packet_id
    result = run_packets(provider, packets, 2, kind, 10.0, {late: 50.0})
    assert result.end >= 10.0 + 50.0 + packets[1].duration - 1e-9
    assert result.finished[late] == pytest.approx(packets[1].duration)


def test_lone_run_outruns_marks_a_run_that_draws_faster_than_the_input_refill() -> None:
    packets = workload(random.Random(4), 4, budget=18_000, max_tokens=2_000, cached=False)
    assert lone_run_outruns(packets, 30_000)
    assert not lone_run_outruns(packets, 2_000_000)


@pytest.mark.parametrize("budget", [4_000, 12_000, 60_000])
def test_packing_keeps_every_packet_within_its_budget_and_every_token_of_code(budget: int) -> None:
    files = code(random.Random(5), 200_000)
    packets = pack(files, budget)
    assert all(sum(t for _, t in group) <= budget for group in packets)
    assert sum(t for group in packets for _, t in group) == pytest.approx(sum(t for _, t in files), abs=len(files))


def test_each_strategy_packs_the_same_code_with_its_own_budget() -> None:
    sc = Scenario("low", 4, "rolling", 1.0, "uncached", 3, 10 * CODE_TOKENS_PER_SLOT)
    told, naive = simulate(sc, "scheduler"), simulate(sc, "naive")
    # Told the limits, the scheduler packs so one run does not outrun the input bucket: smaller, more packets.
    assert told.packets > naive.packets
    assert told.unfinished_files == naive.unfinished_files == 0
    assert told.lone_run_outruns == naive.lone_run_outruns  # judged on the same default packing


def test_without_switches_off_each_named_part_of_the_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit_mcp.scheduling import budget, profile, scheduler
    from benchmarks import scheduler_sim

    for module, name in (
        (scheduler, "WHOLE_WAVE_INPUT_PEAK"),
        (budget, "UNCACHED_PACKET_TOKENS"),
        (profile, "TARGET_UTILISATION"),
        (scheduler, "_by_wave"),
    ):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    monkeypatch.setattr(scheduler_sim, "REPORT_THROTTLED_CALLS", True)
    scheduler_sim.ablate(sorted(scheduler_sim.ABLATIONS))
    assert scheduler_sim.REPORT_THROTTLED_CALLS is False
    assert (scheduler.WHOLE_WAVE_INPUT_PEAK, profile.TARGET_UTILISATION) == (1.0, 0.85)
    assert budget.UNCACHED_PACKET_TOKENS > 10**6 and scheduler._by_wave([0.0, 5.0], [2]) == [0.0, 5.0]


def test_the_simulator_s_help_lists_every_switch(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import scheduler_sim

    with pytest.raises(SystemExit) as exit_:
        scheduler_sim.main(["--help"])
    assert exit_.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert all(name in shown for name in scheduler_sim.ABLATIONS) and "--priors" in shown and "85%," in shown
