"""Reading rate-limit signals from response headers and from the error text a host saw.

Both Anthropic (``anthropic-ratelimit-*``, RFC 3339 resets) and OpenAI
(``x-ratelimit-*``, Go-style duration resets) headers are understood, as are
``retry-after-ms`` and ``retry-after`` (seconds or an HTTP date) and the usual
stderr phrasings of a throttled subagent. Spend caps and a rejected
subscription window are hard stops: waiting does not help, a person must act.

The text is untrusted (a subagent's output can end up in it): every wait is
clamped to ``MAX_WAIT_SECONDS`` and every quoted limit to ``MAX_QUOTED_LIMIT``,
and a number that is not finite is ignored, so no text can set a cooldown for
ever or break the learned state every audit shares.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

MAX_WAIT_SECONDS = 7 * 86_400.0  # the longest provider window (a weekly usage limit)
MAX_QUOTED_LIMIT = 10**12
_MAX_DIGITS = 13

# Header bucket names mapped to the limit keys of ``limits.resolve_limits``.
_ANTHROPIC_BUCKETS = {
    "requests": "requests_per_minute",
    "input-tokens": "input_tokens_per_minute",
    "output-tokens": "output_tokens_per_minute",
}
_OPENAI_BUCKETS = {"requests": "requests_per_minute", "tokens": "input_tokens_per_minute"}

_GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s))+$")
_GO_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

_HEADER_LINE = re.compile(
    r"\b((?:anthropic|x)-ratelimit-[a-z0-9-]+|retry-after(?:-ms)?)[\"']?\s*[:=]\s*[\"']?([^\s,;\"'}]+"
    r"(?:,\s*\d{2} \w{3} \d{4} [\d:]+ GMT)?)",
    re.I,
)
_RATE_LIMITED = re.compile(
    r"\b429\b|rate[ _-]?limit|too many requests|per-minute rate limit|request rejected \(429\)|quota exceeded", re.I
)
_OVERLOADED = re.compile(r"\b529\b|overloaded", re.I)
_TRY_AGAIN = re.compile(
    r"(?:try again|retry|wait)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*(?:ms|milliseconds?|s|secs?|seconds?|m|mins?"
    r"|minutes?|h|hours?)\s*)+)",
    re.I,
)
_PHRASE_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)", re.I)
# Limits the provider's own message quotes: Anthropic's "would exceed the rate limit for your organization
# (…) of 30,000 input tokens per minute" and OpenAI's "on tokens per min (TPM): Limit 30000".
_QUOTED_LIMIT = re.compile(
    r"\bof ([\d,]+) (input tokens|output tokens|tokens|requests) per minute"
    r"|\bon (input tokens|output tokens|tokens|requests) per min(?:ute)?\s*\([A-Z]+\):\s*Limit ([\d,]+)",
    re.I,
)
_QUOTED_KEYS = {
    "input tokens": "input_tokens_per_minute",
    "output tokens": "output_tokens_per_minute",
    "tokens": "input_tokens_per_minute",
    "requests": "requests_per_minute",
}
_SPEND_CAP = re.compile(
    r"enforced_spend_limit|spend(?:ing)? (?:limit|cap)|credit balance is too low|insufficient_quota"
    r"|exceeded your current quota|billing hard limit",
    re.I,
)
_SUBSCRIPTION = re.compile(
    r"unified-status\s*[:=]\s*[\"']?rejected|(?:5-hour|five-hour|weekly|7-day) limit|usage limit reached"
    r"|you've hit your (?:usage )?limit|limit will reset at",
    re.I,
)


@dataclass(frozen=True)
class RateLimitSignal:
    """What one response or error text says about the provider's limits."""

    rate_limited: bool = False
    overloaded: bool = False
    retry_after_seconds: float | None = None
    limits: dict[str, int] = field(default_factory=dict)
    remaining: dict[str, int] = field(default_factory=dict)
    resets: dict[str, datetime] = field(default_factory=dict)
    hard_stop: str | None = None

    def wait_until(self, now: datetime) -> datetime | None:
        """The later of retry-after and the reset of any exhausted bucket; None when neither is known."""
        candidates = [now + timedelta(seconds=self.retry_after_seconds)] if self.retry_after_seconds else []
        candidates += [at for key, at in self.resets.items() if self.remaining.get(key, 1) <= 0]
        if self.rate_limited and not candidates and self.resets:
            candidates.append(max(self.resets.values()))
        return max(candidates) if candidates else None


def clamp_wait(seconds: float) -> float | None:
    """A wait in seconds from 0 to ``MAX_WAIT_SECONDS``; ``None`` for NaN."""
    if math.isnan(seconds):
        return None
    return min(max(0.0, seconds), MAX_WAIT_SECONDS)


def go_duration(text: str) -> float | None:
    """Seconds in a Go duration such as ``1s``, ``6m0s``, ``12ms`` or ``1h2m3.5s`` (clamped to a week)."""
    value = text.strip()
    if not value or len(value) > 64 or not _GO_DURATION.match(value):
        return None
    return clamp_wait(sum(float(n) * _GO_UNITS[unit] for n, unit in _GO_PART.findall(value)))


def _number(text: str) -> float | None:
    """``text`` as a plain, finite number, or None when it is some other format (a date, a duration)."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _when(value: str, now: datetime) -> datetime | None:
    """An RFC 3339 time, a Go duration, a number of seconds, or an HTTP date."""
    text = value.strip()
    seconds = go_duration(text)
    if seconds is not None:
        return now + timedelta(seconds=seconds)
    if (number := _number(text)) is not None:
        return now + timedelta(seconds=clamp_wait(number) or 0.0)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return min(moment, now + timedelta(seconds=MAX_WAIT_SECONDS))


def _retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    if "retry-after-ms" in headers and (ms := _number(headers["retry-after-ms"])) is not None:
        return clamp_wait(ms / 1000)
    # An unreadable retry-after-ms falls back to retry-after, as the official SDKs do.
    if "retry-after" in headers:
        at = _when(headers["retry-after"], now)
        if at is not None:
            return max(0.0, (at - now).total_seconds())
    return None


def _int(value: str) -> int | None:
    number = _number(value)
    return int(number) if number is not None and abs(number) <= MAX_QUOTED_LIMIT else None


def parse_headers(headers: Mapping[str, str], now: datetime, *, status: int | None = None) -> RateLimitSignal:
    """Read the rate-limit headers of one response (names are matched case-insensitively)."""
    h = {k.lower(): str(v) for k, v in headers.items()}
    limits: dict[str, int] = {}
    remaining: dict[str, int] = {}
    resets: dict[str, datetime] = {}
    for bucket, key in _ANTHROPIC_BUCKETS.items():
        base = f"anthropic-ratelimit-{bucket}"
        _read_bucket(h, f"{base}-limit", f"{base}-remaining", f"{base}-reset", key, now, limits, remaining, resets)
    for bucket, key in _OPENAI_BUCKETS.items():
        _read_bucket(
            h,
            f"x-ratelimit-limit-{bucket}",
            f"x-ratelimit-remaining-{bucket}",
            f"x-ratelimit-reset-{bucket}",
            key,
            now,
            limits,
            remaining,
            resets,
        )
    hard_stop = None
    if h.get("anthropic-ratelimit-unified-status", "").lower() == "rejected":
        reset = h.get("anthropic-ratelimit-unified-reset")
        hard_stop = "the subscription's usage window is exhausted" + (f" until {reset}" if reset else "")
    retry = _retry_after(h, now)
    rate_limited = status == 429 or (status is None and retry is not None and bool(limits or remaining))
    if status == 429 and retry is None and not resets and hard_stop is None:
        # A 429 that names no time to wait is Anthropic's spend cap.
        hard_stop = "the provider refused with a 429 that names no time to wait (a spend cap)"
    return RateLimitSignal(
        rate_limited=rate_limited or hard_stop is not None,
        overloaded=status == 529,
        retry_after_seconds=retry,
        limits=limits,
        remaining=remaining,
        resets=resets,
        hard_stop=hard_stop,
    )


def _read_bucket(
    h: Mapping[str, str],
    limit: str,
    remaining: str,
    reset: str,
    key: str,
    now: datetime,
    limits: dict[str, int],
    left: dict[str, int],
    resets: dict[str, datetime],
) -> None:
    if limit in h and (value := _int(h[limit])) is not None and value > 0:
        limits[key] = value
    if remaining in h and (value := _int(h[remaining])) is not None:
        left[key] = value
    if reset in h and (at := _when(h[reset], now)) is not None:
        resets[key] = at


def parse_error_text(text: str, now: datetime) -> RateLimitSignal:
    """What a subagent's error text says: throttled or not, how long to wait, any headers or limits it quotes
    (headers win over the message's own words), hard stops."""
    quoted = {name.lower(): value for name, value in _HEADER_LINE.findall(text)}
    from_headers = parse_headers(quoted, now) if quoted else RateLimitSignal()
    retry = from_headers.retry_after_seconds
    if retry is None and (m := _TRY_AGAIN.search(text)):
        retry = clamp_wait(sum(float(n) * _phrase_unit(u) for n, u in _PHRASE_PART.findall(m.group(1))))
    hard_stop = from_headers.hard_stop
    if _SPEND_CAP.search(text):
        hard_stop = "the provider's spend cap or credit balance is exhausted: " + _excerpt(text, _SPEND_CAP)
    elif hard_stop is None and _SUBSCRIPTION.search(text):
        hard_stop = "the subscription's usage window is exhausted: " + _excerpt(text, _SUBSCRIPTION)
    rate_limited = bool(_RATE_LIMITED.search(text)) or from_headers.rate_limited or hard_stop is not None
    limits = dict(from_headers.limits)
    for amount, unit, unit_after, amount_after in _QUOTED_LIMIT.findall(text):
        digits = (amount or amount_after).replace(",", "")
        value = int(digits) if 0 < len(digits) <= _MAX_DIGITS else 0
        if 0 < value <= MAX_QUOTED_LIMIT:
            limits.setdefault(_QUOTED_KEYS[(unit or unit_after).lower()], value)
    overloaded = bool(_OVERLOADED.search(text)) and not _RATE_LIMITED.search(text)
    return RateLimitSignal(
        rate_limited=rate_limited and not overloaded,
        overloaded=overloaded,
        retry_after_seconds=retry,
        limits=limits,
        remaining=from_headers.remaining,
        resets=from_headers.resets,
        hard_stop=hard_stop,
    )


def stop_summary(hard_stop: str) -> str:
    """A hard stop without the words it quotes: what the learned state every audit reads may keep of it (the
    excerpt and the reset time come from a text the repository under audit may have written)."""
    for cut in (": ", " until ", " (printed"):
        hard_stop = hard_stop.split(cut, 1)[0]
    return hard_stop


def _phrase_unit(unit: str) -> float:
    u = unit.lower()
    if u.startswith(("ms", "milli")):
        return 1e-3
    if u.startswith("h"):
        return 3600.0
    if u.startswith("m"):
        return 60.0
    return 1.0


def _excerpt(text: str, pattern: re.Pattern[str]) -> str:
    m = pattern.search(text)
    assert m is not None
    start = max(0, m.start() - 80)
    return text[start : m.end() + 120].strip()
