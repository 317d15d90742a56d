"""What a successful worker printed: Claude Code and Codex usage, rate-limit events and headers."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from audit_mcp.scheduling.ratelimits import parse_error_text
from audit_mcp.scheduling.worker_output import read_worker_output

CLAUDE_JSON = json.dumps(
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 61998,
        "duration_api_ms": 51976,
        "num_turns": 14,
        "result": "Submitted.",
        "session_id": "9f1c",
        "total_cost_usd": 0.31,
        "usage": {
            "input_tokens": 3120,
            "cache_creation_input_tokens": 18500,
            "cache_read_input_tokens": 215635,
            "output_tokens": 4106,
        },
    }
)
REJECTED = {
    "type": "rate_limit_event",
    "rate_limit_info": {"status": "rejected", "resetsAt": 1784283600, "rateLimitType": "five_hour"},
}
CODEX = "\n".join(
    json.dumps(e)
    for e in (
        {"type": "thread.started", "thread_id": "t1"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"type": "agent_message", "text": "done"}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 26549, "cached_input_tokens": 22272, "output_tokens": 1590},
        },
        {"type": "turn.completed", "usage": {"input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 10}},
    )
)


def test_claude_code_json_output_gives_the_charged_input_output_turns_and_seconds() -> None:
    report = read_worker_output("some text before\n" + CLAUDE_JSON + "\n", "")
    assert report.source == "claude-code"
    # Cache reads do not count against the input-token limit; cache writes do.
    assert report.usage == {"input_tokens": 21620, "output_tokens": 4106, "api_calls": 14, "seconds": 61.998}
    assert report.text == ""


def test_a_rejected_window_in_stream_json_is_a_hard_stop_until_its_reset() -> None:
    stream = "\n".join([json.dumps({"type": "system", "subtype": "init"}), json.dumps(REJECTED), CLAUDE_JSON])
    report = read_worker_output(stream, "")
    assert report.usage["output_tokens"] == 4106
    signal = parse_error_text(report.text, datetime(2026, 7, 1, tzinfo=UTC))
    assert signal.hard_stop and "2026-07-17T" in signal.hard_stop


def test_an_allowed_rate_limit_event_teaches_nothing() -> None:
    allowed = {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": 1784283600}}
    assert read_worker_output(json.dumps(allowed), "").text == ""


def test_codex_usage_is_summed_over_its_turns() -> None:
    report = read_worker_output(CODEX, "")
    assert report.source == "codex"
    assert report.usage == {"input_tokens": 27549, "output_tokens": 1600}


def test_headers_quoted_on_stderr_become_limits_and_retried_429s_count_as_absorbed_calls() -> None:
    stderr = (
        "anthropic-ratelimit-input-tokens-limit: 450000\n"
        "anthropic-ratelimit-input-tokens-remaining: 1200\n"
        "API Error (429 rate_limit_error) · Retrying in 5 seconds… (attempt 1/10)\n"
        "API Error (429 rate_limit_error) · Retrying in 9 seconds… (attempt 2/10)\n"
    )
    report = read_worker_output("", stderr)
    assert report.usage == {"rate_limited_calls": 2}
    signal = parse_error_text(report.text, datetime(2026, 7, 1, tzinfo=UTC))
    assert signal.limits == {"input_tokens_per_minute": 450000}


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "plain text, no JSON at all",
        '{"type": "result", "usage": "not an object"}',
        '{"type": "result", "usage": {"input_tokens": -5, "output_tokens": 1e400}}',
        '{"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 99999999999}}',
        "[1, 2, 3]",
        '{"unterminated": ',
    ],
    ids=["empty", "text", "usage-not-object", "bad-numbers", "reset-out-of-range", "array", "broken-json"],
)
def test_odd_output_never_breaks_the_reader(stdout: str) -> None:
    report = read_worker_output(stdout, "")
    assert all(0 <= v < 1e12 for v in report.usage.values())
