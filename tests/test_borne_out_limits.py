"""A built-in guess at the limits binds once throttling bears it out: runs refused at about the width the guess
allows show the key is on that tier; runs refused far above it show a better one, and the guess stays a guess."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mcp import Client

from audit_mcp.scheduling.learned import LearnedStore
from audit_mcp.scheduling.learning import Context, learn_failure, learn_usage
from audit_mcp.scheduling.limits import Limit, ResolvedLimits
from audit_mcp.scheduling.profile import CORROBORATED_SOURCE, Learned, lapsed, with_observed
from audit_mcp.scheduling.scheduler import capacity_bounds
from audit_mcp.surfaces.server import build_server
from tests.conftest import ScriptedReviewer
from tests.driving import call_ok

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TIER_ONE = (50, 30_000, 8_000)  # requests, input and output tokens per minute
ITPM = "input_tokens_per_minute"
# A cached run: charged twice its 10,000-token packet over 200 s, 20 calls of which 4 were refused and retried.
THROTTLED = {"api_calls": 20, "rate_limited_calls": 4, "seconds": 200, "input_tokens": 20_000, "output_tokens": 500}


def guessed(values: tuple[int, int, int] = TIER_ONE, itpm_confidence: str = "low") -> ResolvedLimits:
    keys = ("requests_per_minute", ITPM, "output_tokens_per_minute")
    table = {k: Limit(v, "built-in default", "low") for k, v in zip(keys, values, strict=True)}
    table[ITPM] = Limit(values[1], "built-in default" if itpm_confidence == "low" else "test", itpm_confidence)
    table["context_tokens"] = Limit(200_000, "built-in default", "low")
    table["output_tokens"] = Limit(16_000, "built-in default", "low")
    return ResolvedLimits("anthropic", "claude-test", table)


def ctx(limits: ResolvedLimits, in_use: float) -> Context:
    return Context(limits, 16, "rolling", 10_000, in_use)


def guess_allows(limits: ResolvedLimits, learned: Learned) -> float:
    """The width the guessed input limit would allow if it bound."""
    bound = {k: Limit(v.value, v.source, "medium") for k, v in limits.limits.items()}
    trial = ResolvedLimits(limits.provider, limits.model, bound)
    return capacity_bounds(trial, 16, 10_000, learned)[ITPM]


def _after_one_packet(limits: ResolvedLimits) -> Learned:
    """What one clean packet teaches: the run profile the widths are computed with."""
    clean = {**THROTTLED, "rate_limited_calls": 0}
    return learn_usage(Learned(), clean, 10_000, NOW - timedelta(minutes=5), ctx(limits, 1))


def test_runs_throttled_at_about_the_width_the_guess_allows_make_it_bind() -> None:
    limits = guessed()
    state = _after_one_packet(limits)
    allows = guess_allows(limits, state)
    assert 1 < allows < 8
    width = allows * 1.25  # throttled a little above it, as a right guess that did not bind is
    before = state
    state = learn_usage(state, THROTTLED, 10_000, NOW, ctx(limits, width))
    assert state.corroborated_limits == {ITPM: 30_000} and state.corroborated_at == NOW
    seen = with_observed(limits, state).limits[ITPM]
    assert seen.confidence == "medium" and seen.source.startswith(CORROBORATED_SOURCE)
    # One correction for one cause: the bound guess narrows the width, so the learned cap is not also cut.
    assert before.cap is not None and state.cap is not None and state.cap >= before.cap
    # The other guesses, which did not bind first, stay guesses.
    assert with_observed(limits, state).limits["requests_per_minute"].confidence == "low"


def test_runs_throttled_far_above_what_the_guess_allows_leave_it_a_guess() -> None:
    # A key on a better tier: runs went on at three times the guess's width before any call was refused.
    limits = guessed()
    state = _after_one_packet(limits)
    width = guess_allows(limits, state) * 3
    before = state
    state = learn_usage(state, THROTTLED, 10_000, NOW, ctx(limits, width))
    assert state.corroborated_limits == {}
    assert with_observed(limits, state).limits[ITPM].confidence == "low"
    assert before.cap is not None and state.cap is not None and state.cap < before.cap  # the cap narrows, as before


def test_runs_that_came_back_clean_far_above_what_the_guess_allows_refute_it() -> None:
    # Runs went clean at twice the guess's width before a trickle of refusals (a busy shared key) was counted
    # as throttling near it: the key is on a better tier, and the guess stays a guess.
    limits = guessed()
    state = _after_one_packet(limits)
    allows = guess_allows(limits, state)
    clean = {**THROTTLED, "rate_limited_calls": 0}
    state = learn_usage(state, clean, 10_000, NOW - timedelta(minutes=1), ctx(limits, allows * 2))
    assert state.clean_width == pytest.approx(allows * 2)
    state = learn_usage(state, THROTTLED, 10_000, NOW, ctx(limits, allows * 1.25))
    assert state.corroborated_limits == {}


def test_a_limit_known_better_near_the_width_takes_the_blame() -> None:
    # The input limit is configured (medium) and sets about the width in use: the 429s are its, and the guessed
    # request and output limits are not borne out by them.
    limits = guessed(itpm_confidence="medium")
    state = _after_one_packet(limits)
    width = guess_allows(limits, state) * 1.25
    state = learn_usage(state, THROTTLED, 10_000, NOW, ctx(limits, width))
    assert state.corroborated_limits == {}


def test_a_rate_limited_failure_that_quotes_no_limit_bears_the_guess_out_too() -> None:
    limits = guessed()
    state = _after_one_packet(limits)
    width = guess_allows(limits, state) * 1.25
    failed = learn_failure(state, 'API Error: 429 {"type":"rate_limit_error"} retry-after: 30', NOW, ctx(limits, width))
    assert failed.corroborated_limits == {ITPM: 30_000}
    quoted = learn_failure(
        state,
        'API Error: 429 {"type":"rate_limit_error","message":"This request would exceed the rate limit for your '
        'organization of 30,000 input tokens per minute."} retry-after: 30',
        NOW,
        ctx(limits, width),
    )
    assert quoted.corroborated_limits == {} and quoted.observed_limits == {ITPM: 30_000}  # the quote is the truth


def test_a_borne_out_guess_lapses_after_a_half_life_and_binds_only_the_guess_it_was() -> None:
    limits = guessed()
    state = Learned(corroborated_limits={ITPM: 30_000}, corroborated_at=NOW)
    day = timedelta(hours=24)
    assert lapsed(state, NOW + day / 2, day) is state
    assert lapsed(state, NOW + day, day).corroborated_limits == {}
    # A later release's table (or another model's) guesses differently: what was borne out was this guess.
    assert with_observed(guessed((50, 40_000, 8_000)), state).limits[ITPM].confidence == "low"
    assert with_observed(limits, state).limits[ITPM].confidence == "medium"
    # Learning a day later starts from the lapsed state.
    clean = {**THROTTLED, "rate_limited_calls": 0}
    assert learn_usage(state, clean, 10_000, NOW + day, ctx(limits, 1)).corroborated_limits == {}


def test_a_borne_out_guess_is_kept_in_the_learned_state_file(tmp_path: Path) -> None:
    store = LearnedStore(tmp_path / "learned.sqlite3")
    store.update(
        "anthropic/claude-test", lambda s: Learned(corroborated_limits={ITPM: 30_000}, corroborated_at=NOW), NOW
    )
    again = LearnedStore(tmp_path / "learned.sqlite3").get("anthropic/claude-test")
    assert again.corroborated_limits == {ITPM: 30_000} and again.corroborated_at == NOW


@pytest.mark.anyio
async def test_over_mcp_a_wave_throttled_under_the_built_in_limits_is_paced_to_them_and_says_so(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    # Nothing configured: the built-in table guesses the limits, and a guess does not bind. The first wave's two
    # runs each charged nine times their packet (every call re-sending it) and had calls refused: at that draw
    # the guessed 30,000 input tokens a minute allow about one and a half runs at once, near the two in use, so
    # the key is on that tier.
    (repo / ".audit-mcp.toml").write_text(
        'context_pass = false\nverification_pass = false\nlenses = ["security", "correctness"]\n'
        "max_packet_tokens = 4000\n"
    )
    async with Client(build_server(repo, clock=lambda: NOW)) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4})
        assert step["step_kind"] == "dispatch_review"
        read = await client.read_resource(f"audit://runs/{step['run_id']}/dispatch-plan")
        plan = json.loads(read.contents[0].text)  # type: ignore[union-attr]
        before = await call_ok(client, "quota_status", {})
        assert before["limits"][ITPM]["confidence"] == "low"
        for packet in plan["packets"][: plan["wave_size"]]:
            usage = {"input_tokens": 9 * packet["estimated_tokens"], "output_tokens": 2_000, "api_calls": 12}
            usage |= {"seconds": 600, "rate_limited_calls": 2}
            args = {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)}
            assert (await call_ok(client, "submit_packet", {**args, "usage": usage}))["accepted"]
        status = await call_ok(client, "plan_status", {"run_id": plan["run_id"]})
        quota = await call_ok(client, "quota_status", {})
    itpm = quota["limits"][ITPM]
    assert itpm["confidence"] == "medium" and itpm["source"].startswith(CORROBORATED_SOURCE), itpm
    assert quota["limits"]["requests_per_minute"]["confidence"] == "low"
    assert status["forecast"]["paced_by"] == ITPM
    assert "from the built-in table" in status["forecast"]["pace"] and "half_life_hours" in status["forecast"]["pace"]
