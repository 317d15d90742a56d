"""Classifying the error text a host saw when a subagent failed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "auth_or_config",
        re.compile(
            r"\b(401|403)\b|unauthori[sz]ed|forbidden|invalid[ _-]?api[ _-]?key|authentication|permission denied"
            r"|not logged in|please run /login|credit balance|enforced_spend_limit|spend limit|billing"
            r"|model[^\n]{0,40}not found|no such model|unknown tool|tool .{0,40}not (available|found)",
            re.I,
        ),
    ),
    (
        "rate_limited",
        re.compile(
            r"\b429\b|rate[ _-]?limit|too many requests|per-minute rate limit|quota exceeded|usage limit"
            r"|overloaded|\b529\b",
            re.I,
        ),
    ),
    (
        "context_overflow",
        re.compile(
            r"context (length|window)|prompt is too long|maximum context|too many tokens|token limit"
            r"|input is too long|context_length_exceeded",
            re.I,
        ),
    ),
    ("timeout", re.compile(r"time[d ]?[ -]?out|deadline exceeded|took too long|\bETIMEDOUT\b", re.I)),
    (
        "policy_refusal",
        re.compile(
            r"usage polic|content polic|refus(ed|al)|cannot (help|assist) with|safety (system|filter)"
            r"|violat(es|ion)",
            re.I,
        ),
    ),
)
_RETRY_AFTER_MS = re.compile(r"retry[-_ ]after[-_ ]ms[\"'=:\s]+(\d+)", re.I)
_RETRY_AFTER = re.compile(r"retry[-_ ]after[\"'=:\s]+(\d+(?:\.\d+)?)", re.I)
_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s|sec|seconds|m|min|minutes)\b", re.I)


@dataclass(frozen=True)
class FailureClass:
    kind: str
    retry_after_seconds: float | None


def classify(text: str) -> FailureClass:
    """The failure kind and, for rate limits, how long the provider asked to wait."""
    kind = next((name for name, pattern in _PATTERNS if pattern.search(text)), "other")
    if not text.strip() or text.strip() == NOT_SUBMITTED:
        kind = "not_submitted"
    return FailureClass(kind, retry_after(text) if kind == "rate_limited" else None)


def retry_after(text: str) -> float | None:
    if m := _RETRY_AFTER_MS.search(text):
        return int(m.group(1)) / 1000
    if m := _RETRY_AFTER.search(text):
        return float(m.group(1))
    if m := _TRY_AGAIN.search(text):
        value, unit = float(m.group(1)), m.group(2).lower()
        return value / 1000 if unit == "ms" else value * 60 if unit.startswith("m") and unit != "ms" else value
    return None


def cooldown_until(failed_at: datetime, retry_seconds: float | None) -> datetime:
    """When a rate-limited host may launch again: the provider's retry-after, else a minute."""
    return failed_at + timedelta(seconds=retry_seconds if retry_seconds is not None else 60.0)


NOT_SUBMITTED = "the packet was neither submitted nor reported as failed"
