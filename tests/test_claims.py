"""The bounds one audit's word is held to, and corroboration by another: ``scheduling.claims`` as a table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from audit_mcp.core.config import ModelConfig
from audit_mcp.scheduling.claims import Verdict, held_claims, observed, weigh
from audit_mcp.scheduling.limits import resolve_limits
from audit_mcp.scheduling.profile import Learned

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
DAY = timedelta(hours=24)
BASE = resolve_limits("claude-sonnet-4-6", None, ModelConfig())  # the table: 50 RPM, 30,000 ITPM, 8,000 OTPM
RPM = "requests_per_minute"


def _said(
    state: Learned, teacher: str, rpm: int | None = None, wait: float | None = None, at: datetime = NOW
) -> tuple[Verdict, Learned]:
    until = at + timedelta(seconds=wait) if wait is not None else None
    verdict = weigh(state, {RPM: rpm} if rpm else {}, until, at, teacher=teacher, base=BASE, half_life=DAY)
    return verdict, (verdict.state if verdict.held else observed(verdict.state, verdict.limits, at))


@pytest.mark.parametrize(
    ("rpm", "wait", "held"),
    [
        (20, None, False),  # within a quarter of the table's 50
        (12, None, True),  # more than 4x below it
        (1, None, True),
        (None, 300.0, False),  # a per-minute bucket's wait
        (None, 361.0, True),  # past the longest reset a provider documents for one
        (None, 604_800.0, True),
        (20, 604_800.0, True),  # a text is held whole
    ],
)
def test_one_audits_word_is_believed_within_its_bounds_and_held_past_them(
    rpm: int | None, wait: float | None, held: bool
) -> None:
    verdict, _state = _said(Learned(), "x", rpm, wait)
    assert verdict.held is held
    assert (RPM in verdict.limits) is (rpm is not None and not held)


def test_a_claim_another_audit_makes_too_binds_at_what_both_say() -> None:
    _, state = _said(Learned(), "x", rpm=1, wait=604_800.0)
    assert state.observed_limits == {} and held_claims(state, NOW, DAY)
    again, state = _said(state, "x", rpm=1, wait=604_800.0)  # the same repository again proves nothing
    assert again.held
    later = NOW + timedelta(minutes=5)
    verdict, state = _said(state, "y", rpm=3, wait=3_600.0, at=later)
    assert not verdict.held
    assert verdict.limits == {RPM: (3, ("x", "y"))}  # the higher of the two lowest
    assert verdict.until == later + timedelta(hours=1)  # the earlier of the two ends
    assert state.observed_limits == {RPM: 3} and held_claims(state, later, DAY) == []


def test_claims_lapse_after_a_half_life_so_old_ones_corroborate_nothing() -> None:
    _, state = _said(Learned(), "x", rpm=1)
    verdict, _state = _said(state, "y", rpm=1, at=NOW + DAY + timedelta(seconds=1))
    assert verdict.held


def test_no_audit_lowers_what_another_observed_by_more_than_a_quarter_step_by_step() -> None:
    _, state = _said(Learned(), "z", rpm=4_000)
    first, state = _said(state, "x", rpm=1_000)
    assert not first.held and state.observed_limits[RPM] == 1_000
    second, state = _said(state, "x", rpm=250)  # x's own 1,000 is no reference for x: z's 4,000 is
    assert second.held and state.observed_limits[RPM] == 1_000


def test_a_repositorys_low_configured_limit_does_not_lower_what_its_word_may_claim() -> None:
    low = resolve_limits("claude-sonnet-4-6", None, ModelConfig(requests_per_minute=1))
    verdict = weigh(Learned(), {RPM: 1}, None, NOW, teacher="x", base=low, half_life=DAY)
    assert verdict.held
