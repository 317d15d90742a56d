"""The benchmark's simulator: no simulated audit finishes before the lower bound, hosts do as they are told,
and the best fixed width in hindsight is no slower than any fixed width."""

from __future__ import annotations

import random

import pytest

from benchmarks.scheduler_sim import (
    TIERS,
    Orders,
    Provider,
    Scenario,
    code,
    lone_run_outruns,
    lower_bound,
    pack,
    run_packets,
    scenarios,
    simulate,
    subgrid,
    workload,
)
from benchmarks.sim.host import Fixed
from benchmarks.sim.strategies import MAX_ATTEMPTS, POLITE_SHARE, best_fixed, run_audit


class _Told:
    """A controller that always says the same thing and records what it hears."""

    def __init__(self, orders: Orders) -> None:
        self.said = orders
        self.heard: list[str] = []

    def orders(self, now: float, launched: int, waiting: frozenset[str]) -> Orders:
        return self.said

    def finished(self, packet: object, usage: dict[str, float], now: float) -> None:
        self.heard.append(f"done:{usage['rate_limited_calls']:g}")

    def failed(self, packet: object, error: str, now: float) -> None:
        self.heard.append("failed")


ROOMY = (1_000_000, 10**9, 10**9)


def _cases() -> list[Scenario]:
    rng = random.Random(7)
    return [
        Scenario(
            tier,
            rng.choice(("cached", "uncached")),
            rng.choice((4, 10)),
            rng.choice(("rolling", "whole_wave")),
            rng.choice(("known", "unknown", "half", "double")),
            rng.choice((3, 4, 6, 20)),
            seed,
            rng.choice((0.0, 0.02)),
        )
        for seed, tier in enumerate(list(TIERS) * 4)
    ]


@pytest.mark.parametrize("strategy", ["scheduler", "naive", "oracle", "fixed:2"])
def test_every_simulated_makespan_is_at_least_the_lower_bound(strategy: str) -> None:
    for sc in _cases():
        outcome = simulate(sc, strategy, warm=strategy == "scheduler")
        assert outcome.makespan >= outcome.lower_bound * (1 - 1e-9), sc
        assert outcome.calls > 0


def test_the_simulated_host_counts_each_packet_s_rate_limited_calls_for_its_usage() -> None:
    packets = workload(random.Random(3), 6, 20_000, 2_000, cached=False)
    told = _Told(Orders("rolling", 6, 6))
    result = run_packets(Provider(TIERS["low"], 2_000), packets, told, True, 0.0)
    assert result.rate_limited > 0
    assert sum(result.throttled.values()) == result.rate_limited
    assert set(result.throttled) <= {p.packet_id for p in packets}
    assert len(told.heard) == len(packets) and any(h != "done:0" for h in told.heard)


def test_the_lower_bound_is_the_longest_run_when_nothing_else_binds() -> None:
    packets = workload(random.Random(1), 3, budget=20_000, max_tokens=4_096, cached=True)
    assert lower_bound(packets, ROOMY, cap=20, kind="rolling") == max(p.duration for p in packets)


def test_a_whole_wave_host_waits_for_each_wave_s_slowest_packet() -> None:
    packets = workload(random.Random(2), 6, budget=20_000, max_tokens=4_096, cached=True)
    durations = sorted((p.duration for p in packets), reverse=True)
    bound = lower_bound(packets, ROOMY, cap=3, kind="whole_wave")
    assert bound == pytest.approx(max(durations[0] + durations[3], sum(durations) / 3))


@pytest.mark.parametrize("mode", ["rolling", "whole_wave"])
def test_a_simulated_host_starts_no_packet_before_its_launch_offset(mode: str) -> None:
    packets = workload(random.Random(3), 2, budget=20_000, max_tokens=4_096, cached=True)
    late = packets[1].packet_id
    told = _Told(Orders(mode, 2, 2, {late: 50.0}))
    result = run_packets(Provider(ROOMY, 4_096), packets, told, True, 10.0)
    assert result.end >= 10.0 + 50.0 + packets[1].duration - 1e-9
    assert result.finished[late] == pytest.approx(packets[1].duration)


def test_a_rolling_host_refills_a_slot_as_soon_as_one_frees_and_a_whole_wave_host_does_not() -> None:
    packets = workload(random.Random(4), 3, budget=20_000, max_tokens=4_096, cached=True)
    shortest = min(packets[:2], key=lambda p: p.duration)
    rolling = run_packets(Provider(ROOMY, 4_096), packets, Fixed(2, "rolling"), True, 0.0)
    waves = run_packets(Provider(ROOMY, 4_096), packets, Fixed(2, "rolling"), False, 0.0)
    assert rolling.end == pytest.approx(
        max(max(p.duration for p in packets[:2]), shortest.duration + packets[2].duration)
    )
    assert waves.end == pytest.approx(max(p.duration for p in packets[:2]) + packets[2].duration)


def test_a_host_that_can_roll_waits_for_whole_waves_when_told_to() -> None:
    packets = workload(random.Random(4), 3, budget=20_000, max_tokens=4_096, cached=True)
    told = run_packets(Provider(ROOMY, 4_096), packets, Fixed(2, "whole_wave"), True, 0.0)
    assert told.end == pytest.approx(max(p.duration for p in packets[:2]) + packets[2].duration)


def test_a_cooldown_holds_every_start_back() -> None:
    packets = workload(random.Random(5), 2, budget=20_000, max_tokens=4_096, cached=True)
    result = run_packets(Provider(ROOMY, 4_096), packets, _Told(Orders("rolling", 2, 2, {}, 100.0)), True, 0.0)
    assert result.end == pytest.approx(100.0 + max(p.duration for p in packets))


def test_the_provider_refuses_about_the_given_share_of_calls_at_random() -> None:
    provider = Provider(ROOMY, 4_096, noise=0.02, rng=random.Random(1))
    refused = [provider.admit(float(t), 1_000) for t in range(20_000)]
    share = sum(r is not None for r in refused) / len(refused)
    assert 0.015 < share < 0.025 and all(r is None or r <= 2 for r in refused)


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
    sc = Scenario("low", "uncached", 10, "rolling", "known", 4, 3)
    told, naive = simulate(sc, "scheduler"), simulate(sc, "naive")
    # Told the limits, the scheduler packs so one run does not outrun the input bucket: smaller, more packets.
    assert told.packets > naive.packets
    assert told.unfinished_files == 0
    assert told.lone_run_outruns == naive.lone_run_outruns  # judged on the same default packing


def test_the_best_fixed_width_in_hindsight_is_no_slower_than_any_fixed_width() -> None:
    sc = Scenario("low", "cached", 6, "rolling", "known", 4, 11)
    best, width = best_fixed(sc)
    every = [simulate(sc, f"fixed:{w}") for w in range(1, 5)]
    assert best.makespan == min(o.makespan for o in every if not o.unfinished_files)
    assert every[width - 1].makespan == best.makespan


def test_the_best_fixed_width_within_the_429_target_meets_at_most_its_share_of_429s() -> None:
    sc = Scenario("low", "cached", 6, "rolling", "known", 4, 11)
    polite, width = best_fixed(sc, polite=True)
    every = [simulate(sc, f"fixed:{w}") for w in range(1, 5)]
    within = [o for w, o in enumerate(every, 1) if w == 1 or o.rate_limited <= POLITE_SHARE * o.calls]
    assert polite.makespan == min(o.makespan for o in within if not o.unfinished_files)
    assert polite.rate_limited <= POLITE_SHARE * polite.calls or width == 1
    assert polite.makespan >= best_fixed(sc)[0].makespan


def test_a_file_whose_packet_fails_max_attempts_times_is_given_up() -> None:
    sc = Scenario("low", "uncached", 4, "rolling", "known", 20, 5)
    files = [("f00000", 40_000)]  # cut in two pieces of 20k: every call re-sends more than the bucket holds
    result = run_audit(sc, _Budget(Fixed(1, "rolling")), files, Provider((50, 10_000, 8_000), 2_000))
    assert result is not None
    outcome, _ = result
    assert outcome.gave_up_files == 1 and outcome.packets == 0 and outcome.failed_packets == 2 * MAX_ATTEMPTS


class _Budget:
    def __init__(self, controller: Fixed) -> None:
        self.controller = controller

    def budget(self, pending: list[tuple[str, int]]) -> int:
        return 20_000

    def start_run(self, packets: list[object], clock: float) -> tuple[list[object], Fixed, float]:
        return packets, self.controller, clock

    def end_run(self, packets: list[object], result: object, clock: float) -> None:
        return None


def test_the_grid_repeats_its_small_shapes_with_random_429s() -> None:
    grid = scenarios(quick=True, seeds=1)
    noisy = [sc for sc in grid if sc.noise]
    assert {sc.noise for sc in noisy} == {0.005, 0.02} and {sc.packets for sc in noisy} == {20, 100}
    calm = {(sc.tier, sc.accounting, sc.packets, sc.kind, sc.limits, sc.cap) for sc in grid if not sc.noise}
    assert all((sc.tier, sc.accounting, sc.packets, sc.kind, sc.limits, sc.cap) in calm for sc in noisy)


@pytest.mark.parametrize(
    ("filters", "kept"),
    [
        pytest.param([], 768, id="no-filter-keeps-the-quick-grid"),
        pytest.param(["tier=low"], 256, id="one-field"),
        pytest.param(["tier=low,mid"], 512, id="one-field-two-values"),
        pytest.param(["tier=low", "kind=whole_wave", "noise=0"], 64, id="fields-combine"),
        pytest.param(["noise=5e-3"], 192, id="numbers-by-value"),
        pytest.param(["cap=3", "packets=20"], 96, id="integers"),
        pytest.param(["tier=none"], 0, id="no-match"),
    ],
)
def test_a_sub_grid_keeps_the_scenarios_whose_fields_match(filters: list[str], kept: int) -> None:
    wanted = subgrid(filters)
    assert sum(wanted(sc) for sc in scenarios(quick=True, seeds=1)) == kept


@pytest.mark.parametrize(
    "bad",
    [pytest.param("tier", id="no-value"), pytest.param("seed=3", id="not-a-field"), pytest.param("tier=", id="empty")],
)
def test_a_sub_grid_filter_that_names_no_field_and_value_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="FIELD=V1"):
        subgrid([bad])


def test_the_simulator_s_help_lists_every_switch(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import scheduler_sim

    with pytest.raises(SystemExit) as exit_:
        scheduler_sim.main(["--help"])
    assert exit_.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    switches = ("--quick", "--noise", "--jobs", "--seeds", "--json", "--strategies", "--only")
    assert all(switch in shown for switch in switches)
    assert all(name in shown for name in scheduler_sim.ABLATIONS)


def test_without_switches_off_each_named_part_of_the_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit_mcp.scheduling import learning, live, profile, scheduler
    from audit_mcp.scheduling.limits import ResolvedLimits
    from audit_mcp.scheduling.profile import Learned
    from benchmarks import scheduler_sim
    from benchmarks.sim import strategies

    for module, name in (
        (strategies, "PROMPT_FOLLOWS_PLAN"),
        (strategies, "LEARN_IN_FLIGHT"),
        (scheduler, "waves_for"),
        (live, "waves_for"),
        (learning, "_explained"),
        (learning, "THROTTLED_SHARE"),
        (scheduler, "slow_start"),
        (learning, "slow_start"),
        (profile, "planning_ratio"),
        (live, "_repack"),
        (learning, "_corroborated"),
    ):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    scheduler_sim.ablate(sorted(scheduler_sim.ABLATIONS))
    assert not strategies.PROMPT_FOLLOWS_PLAN and not strategies.LEARN_IN_FLIGHT
    assert scheduler.waves_for(20, 16, "rolling") == [10, 10] and learning.THROTTLED_SHARE == 0.0
    guessed = ResolvedLimits("openai", "m", {})
    assert not scheduler.slow_start(guessed, Learned()) and profile.planning_ratio(Learned(), "openai") == 8.0
    marker = Learned(cap=3.0)
    assert learning._corroborated(marker, None, None) is marker  # type: ignore[arg-type]
