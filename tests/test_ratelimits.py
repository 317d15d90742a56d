"""Reading rate-limit headers and the error texts of throttled subagents."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from audit_mcp.core.config import ModelConfig
from audit_mcp.scheduling.failures import cooldown_until
from audit_mcp.scheduling.learning import Context, learn_run
from audit_mcp.scheduling.limits import resolve_limits
from audit_mcp.scheduling.pacing import run_outcome
from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.ratelimits import go_duration, parse_error_text, parse_headers

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("12ms", 0.012),
        ("1h2m3.5s", 3723.5),
        ("0s", 0.0),
        ("", None),
        ("soon", None),
        ("5", None),
    ],
    ids=str,
)
def test_go_durations_are_read_as_seconds(text: str, seconds: float | None) -> None:
    assert go_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize(
    ("headers", "status", "retry"),
    [
        ({"retry-after": "30"}, 429, 30.0),
        ({"Retry-After-Ms": "1500", "retry-after": "30"}, 429, 1.5),
        ({"retry-after": "Mon, 30 Nov 2026 12:00:45 GMT"}, 429, 45.0),
        ({"retry-after": "nonsense", "x-ratelimit-reset-requests": "1s"}, 429, None),
    ],
    ids=["seconds", "ms-wins", "http-date", "unreadable"],
)
def test_retry_after_prefers_milliseconds_then_seconds_or_a_date(
    headers: dict[str, str], status: int, retry: float | None
) -> None:
    assert parse_headers(headers, NOW, status=status).retry_after_seconds == retry


def test_anthropic_headers_give_limits_remaining_and_rfc3339_resets() -> None:
    signal = parse_headers(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-input-tokens-limit": "30000",
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": "2026-11-30T12:00:40Z",
            "anthropic-ratelimit-output-tokens-limit": "8000",
            "retry-after": "12",
        },
        NOW,
        status=429,
    )
    assert signal.rate_limited and signal.hard_stop is None
    assert signal.limits == {
        "requests_per_minute": 50,
        "input_tokens_per_minute": 30_000,
        "output_tokens_per_minute": 8_000,
    }
    assert signal.remaining["input_tokens_per_minute"] == 0
    assert signal.wait_until(NOW) == NOW + timedelta(seconds=40)


def test_openai_headers_give_limits_and_go_duration_resets() -> None:
    signal = parse_headers(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "6m0s",
            "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "150000",
            "x-ratelimit-reset-tokens": "12ms",
        },
        NOW,
        status=429,
    )
    assert signal.limits == {"requests_per_minute": 500, "input_tokens_per_minute": 200_000}
    assert signal.wait_until(NOW) == NOW + timedelta(minutes=6)


@pytest.mark.parametrize(
    ("headers", "status", "why"),
    [
        ({}, 429, "spend cap"),
        (
            {"anthropic-ratelimit-unified-status": "rejected", "anthropic-ratelimit-unified-reset": "1764511200"},
            429,
            "usage window",
        ),
    ],
    ids=["429-without-retry-after", "subscription-window-rejected"],
)
def test_hard_stops_are_not_cooldowns(headers: dict[str, str], status: int, why: str) -> None:
    signal = parse_headers(headers, NOW, status=status)
    assert signal.hard_stop is not None and why in signal.hard_stop


def test_a_clean_response_is_not_rate_limited() -> None:
    signal = parse_headers({"anthropic-ratelimit-requests-limit": "4000"}, NOW, status=200)
    assert not signal.rate_limited and signal.hard_stop is None and signal.limits == {"requests_per_minute": 4000}


@pytest.mark.parametrize(
    ("text", "limited", "retry"),
    [
        ("Error: 429 rate_limit_error, retry-after: 90", True, 90.0),
        ("Request rejected (429)", True, None),
        ("API Error: Rate limit reached for requests. Please try again in 1m30s.", True, 90.0),
        ("Number of request tokens has exceeded your per-minute rate limit. Try again in 20 seconds", True, 20.0),
        ('{"type":"rate_limit_error"} headers: {"retry-after-ms": "2500"}', True, 2.5),
        ("rate limited; x-ratelimit-reset-tokens: 6m0s x-ratelimit-remaining-tokens: 0", True, None),
        ("Too Many Requests", True, None),
        ("529 Overloaded: the API is overloaded", False, None),
        ("Request timed out after 600s", False, None),
        ("TypeError: x is undefined", False, None),
    ],
    ids=[
        "retry-after",
        "rejected-429",
        "try-again-go-style",
        "per-minute-phrase",
        "quoted-ms-header",
        "quoted-openai-headers",
        "too-many",
        "overloaded-is-not-a-limit",
        "timeout",
        "crash",
    ],
)
def test_error_texts_of_throttled_subagents(text: str, limited: bool, retry: float | None) -> None:
    signal = parse_error_text(text, NOW)
    assert signal.rate_limited is limited
    assert signal.retry_after_seconds == (pytest.approx(retry) if retry is not None else None)
    assert signal.hard_stop is None


def test_quoted_headers_in_an_error_text_reveal_the_real_limits() -> None:
    signal = parse_error_text(
        "429 anthropic-ratelimit-input-tokens-limit: 30000, "
        "anthropic-ratelimit-input-tokens-reset: 2026-11-30T12:00:30Z",
        NOW,
    )
    assert signal.limits == {"input_tokens_per_minute": 30_000}
    assert signal.wait_until(NOW) == NOW + timedelta(seconds=30)


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        (
            'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would '
            "exceed the rate limit for your organization (1b2c) of 30,000 input tokens per minute. For details, refer "
            'to: https://docs.anthropic.com/en/api/rate-limits."}}',
            {"input_tokens_per_minute": 30_000},
        ),
        (
            "429 rate_limit_error: This request would exceed the rate limit for your organization of 8,000 output "
            "tokens per minute.",
            {"output_tokens_per_minute": 8_000},
        ),
        (
            "Error code: 429 - Rate limit reached for gpt-5 in organization org-abc on tokens per min (TPM): "
            "Limit 30000, Used 28000, Requested 4500. Please try again in 5.0s.",
            {"input_tokens_per_minute": 30_000},
        ),
        (
            "Rate limit reached for gpt-5 in organization org-abc on requests per min (RPM): Limit 500, Used 500, "
            "Requested 1.",
            {"requests_per_minute": 500},
        ),
        (
            "429 anthropic-ratelimit-input-tokens-limit: 40000 would exceed the rate limit of 30,000 input tokens per "
            "minute",
            {"input_tokens_per_minute": 40_000},
        ),
    ],
    ids=["anthropic-input", "anthropic-output", "openai-tpm", "openai-rpm", "header-wins"],
)
def test_limits_quoted_in_the_provider_s_own_message_are_read(text: str, limits: dict[str, int]) -> None:
    signal = parse_error_text(text, NOW)
    assert signal.rate_limited and signal.limits == limits


@pytest.mark.parametrize(
    "text",
    [
        '429 {"error": {"type": "rate_limit_error", "message": "enforced_spend_limit_reached"}}',
        "Your credit balance is too low to access the Anthropic API.",
        "You exceeded your current quota, please check your plan and billing details. insufficient_quota",
        "Claude usage limit reached. Your limit will reset at 5pm (UTC).",
        "5-hour limit reached ∙ resets 3am",
    ],
    ids=["spend-cap", "credit-balance", "openai-quota", "subscription", "five-hour"],
)
def test_spend_caps_and_exhausted_subscriptions_are_hard_stops(text: str) -> None:
    signal = parse_error_text(text, NOW)
    assert signal.hard_stop is not None and signal.rate_limited


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("429 Too Many Requests; retry-after: Mon, 30 Nov 2026 12:05:00 GMT", 300.0),
        ("API Error: Rate limit reached for requests. Please try again in 1m30s.", 90.0),
        ("Error: 429 rate_limit_error, retry-after: 90", 90.0),
        ('{"type":"rate_limit_error"} headers: {"retry-after-ms": "2500"}', 2.5),
        ("rate limited; x-ratelimit-reset-tokens: 6m0s x-ratelimit-remaining-tokens: 0", 360.0),
        ("Too Many Requests", 60.0),
        ("429; retry-after: Mon, 30 Nov 2026 11:00:00 GMT", 60.0),
    ],
    ids=["http-date", "try-again-go-style", "seconds", "ms", "exhausted-bucket", "none", "past-date"],
)
def test_a_stored_failure_s_cooldown_is_the_one_the_scheduler_learns_from_the_same_text(
    text: str, seconds: float
) -> None:
    outcome = run_outcome(launched=2, wave_size=2, succeeded=1, reported={"p1": text}, usage=[], now=NOW)
    ctx = Context(resolve_limits("claude-test", None, ModelConfig()), 2, "rolling", 10_000, 2, timedelta(hours=24))
    learned = learn_run(Learned(), outcome, NOW, ctx)
    assert cooldown_until(text, NOW) == learned.cooldown_until == NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "text",
    [
        "429 Too Many Requests; retry-after: Mon, 30 Nov 2026 12:30:00 GMT",
        "Rate limit reached. Please try again in 2h.",
        "429 rate limited; retry-after: 604800",
    ],
    ids=["http-date-half-an-hour", "try-again-2h", "a-week"],
)
def test_a_wait_longer_than_one_audit_may_impose_binds_that_audit_for_six_minutes_and_no_other(text: str) -> None:
    outcome = run_outcome(launched=2, wave_size=2, succeeded=1, reported={"p1": text}, usage=[], now=NOW)
    ctx = Context(resolve_limits("claude-test", None, ModelConfig()), 2, "rolling", 10_000, 2, timedelta(hours=24))
    learned = learn_run(Learned(), outcome, NOW, ctx)
    assert cooldown_until(text, NOW) == NOW + timedelta(minutes=6)
    assert learned.cooldown_until is None and learned.cap is None and [c[0] for c in learned.claims] == ["wait"]
