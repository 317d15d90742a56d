"""Classifying the error text a host saw when a subagent failed.

How long a throttled host must wait is read by ``ratelimits.parse_error_text``, the one parser of retry-after
headers, HTTP dates and "try again in ..." phrasings, so a stored failure's cooldown is the one the scheduler
learned from the same text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from audit_mcp.scheduling.claims import bounded_wait
from audit_mcp.scheduling.learning import DEFAULT_COOLDOWN
from audit_mcp.scheduling.ratelimits import parse_error_text

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


@dataclass(frozen=True)
class FailureClass:
    kind: str


def classify(text: str) -> FailureClass:
    """The failure kind, from the error text the host saw."""
    kind = next((name for name, pattern in _PATTERNS if pattern.search(text)), "other")
    if not text.strip() or text.strip() == NOT_SUBMITTED:
        kind = "not_submitted"
    return FailureClass(kind)


def cooldown_until(text: str, failed_at: datetime) -> datetime:
    """When a host throttled with this error text may launch again: the latest of the retry-after and the reset
    of any exhausted bucket the text names, else a minute after the failure (as the scheduler learns it). The
    text is one audit's word, so the wait is at most ``claims.MAX_UNCORROBORATED_WAIT``: a longer one binds
    only once another audit saw it too, through the learned state every audit reads."""
    wait = bounded_wait(parse_error_text(text, failed_at).wait_until(failed_at), failed_at)
    return max(wait, failed_at) if wait is not None else failed_at + DEFAULT_COOLDOWN


NOT_SUBMITTED = "the packet was neither submitted nor reported as failed"
