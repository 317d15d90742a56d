"""What a finished headless worker printed about its usage and the provider's rate limits.

Pure: a worker's stdout and stderr in, a ``WorkerReport`` out. Understood:

- Claude Code ``-p --output-format json``: the final ``{"type": "result", ...}`` object, whose ``usage``
  gives ``input_tokens``, ``cache_creation_input_tokens``, ``cache_read_input_tokens`` and
  ``output_tokens``, with ``num_turns`` and ``duration_ms``. Input is counted as the provider's input
  limit counts it: cache reads are free of it, cache writes are not.
- Claude Code ``--output-format stream-json``: the same final result line, and ``rate_limit_event``
  lines; a ``"status": "rejected"`` window (with ``resetsAt``, epoch seconds) is a hard stop until then.
- Codex ``exec --json``: ``turn.completed`` lines, whose ``usage`` (``input_tokens``, ``output_tokens``)
  is summed over the turns; ``error`` and ``turn.failed`` messages.
- Any worker: rate-limit headers quoted on stderr (``anthropic-ratelimit-*``, ``x-ratelimit-*``,
  ``retry-after``), and lines saying a call was rate-limited and retried, counted as absorbed retries.

The ``text`` of a report is read like a failed worker's error text (limits quoted in headers become
high-confidence limits; a rejected window is a hard stop), while the worker's own success stands.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from audit_mcp.scheduling.ratelimits import parse_error_text

MAX_LINE_CHARS = 1_000_000
MAX_TEXT_LINES = 40
_HEADER = re.compile(r"\b(?:anthropic-ratelimit-[a-z0-9-]+|x-ratelimit-[a-z0-9-]+|retry-after(?:-ms)?)\s*[:=]", re.I)
_RETRIED = re.compile(r"(\b429\b|rate[ _-]?limit|too many requests|overloaded).{0,200}\bretry", re.I)


@dataclass(frozen=True)
class WorkerReport:
    """A worker's own figures (``usage`` keys as ``submit_packet`` takes them) and rate-limit text."""

    usage: dict[str, float] = field(default_factory=dict)
    text: str = ""
    source: str | None = None  # "claude-code", "codex", or None when nothing was recognised

    @property
    def empty(self) -> bool:
        return not self.usage and not self.text


def read_worker_output(stdout: str, stderr: str) -> WorkerReport:
    """Usage and rate-limit signals from a worker's output; empty when it printed none of them."""
    usage: dict[str, float] = {}
    lines: list[str] = []
    source = None
    codex = {"input_tokens": 0.0, "output_tokens": 0.0, "turns": 0}
    for event in _events(stdout):
        kind = event.get("type")
        if kind == "result" and isinstance(event.get("usage"), dict):
            usage = _claude_usage(event)
            source = "claude-code"
        elif kind == "rate_limit_event" and isinstance(event.get("rate_limit_info"), dict):
            source = source or "claude-code"
            lines += _rate_limit_event(event["rate_limit_info"])
        elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
            source = "codex"
            codex["turns"] += 1
            for key in ("input_tokens", "output_tokens"):
                codex[key] += _number(event["usage"].get(key))
        elif kind in ("error", "turn.failed"):
            message = event.get("message") or (event.get("error") or {}).get("message")
            if isinstance(message, str) and message.strip():
                lines.append(message.strip()[:500])
    if source == "codex" and codex["turns"]:
        usage = {k: v for k, v in codex.items() if k != "turns" and v}
    retried = 0
    for line in stderr.splitlines():
        if _HEADER.search(line):
            lines.append(line.strip()[:500])
        elif _RETRIED.search(line):
            retried += 1
    if retried and "rate_limited_calls" not in usage:
        usage["rate_limited_calls"] = float(retried)
    return WorkerReport(usage=usage, text="\n".join(lines[:MAX_TEXT_LINES]), source=source)


def _events(stdout: str) -> list[dict[str, Any]]:
    """Every JSON object printed on a line of its own (one for ``json`` output, many for JSON lines)."""
    out = []
    candidates = stdout.splitlines()
    whole = stdout.strip()
    if whole.startswith("{") and "\n" in whole:
        candidates.append(whole)  # one pretty-printed object
    for line in candidates:
        text = line.strip()
        if not text.startswith("{") or len(text) > MAX_LINE_CHARS:
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    number = float(value)
    return number if 0 <= number < 1e12 else 0.0


def _claude_usage(event: dict[str, Any]) -> dict[str, float]:
    raw = event["usage"]
    charged = _number(raw.get("input_tokens")) + _number(raw.get("cache_creation_input_tokens"))
    usage = {
        "input_tokens": charged,
        "output_tokens": _number(raw.get("output_tokens")),
        "api_calls": _number(event.get("num_turns")),
        "seconds": _number(event.get("duration_ms")) / 1000,
    }
    return {k: v for k, v in usage.items() if v}


def _rate_limit_event(info: dict[str, Any]) -> list[str]:
    """A stream-json rate-limit event as the header lines a provider would send: only a rejected window counts."""
    if str(info.get("status", "")).lower() != "rejected":
        return []
    lines = ["anthropic-ratelimit-unified-status: rejected"]
    resets = _number(info.get("resetsAt"))
    if resets:
        try:
            moment = datetime.fromtimestamp(resets, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        except (OverflowError, OSError, ValueError):
            moment = None  # a reset no calendar holds: the window is still rejected, its end unknown
        if moment:
            lines.append(f"anthropic-ratelimit-unified-reset: {moment}")
    if isinstance(info.get("rateLimitType"), str):
        lines.append(f"the {info['rateLimitType']} usage window was rejected")
    return lines


def describe(report: WorkerReport, now: datetime) -> str:
    """One line for a person: the usage a worker printed and the limits or stops its output stated."""
    parts = []
    u = report.usage
    if u.get("input_tokens") or u.get("output_tokens"):
        figures = [f"{u.get('input_tokens', 0):.0f} input, {u.get('output_tokens', 0):.0f} output tokens"]
        if u.get("api_calls"):
            figures.append(f"{u['api_calls']:.0f} call(s)")
        if u.get("seconds"):
            figures.append(f"{u['seconds']:.0f}s")
        parts.append(f"usage ({', '.join(figures)})")
    if u.get("rate_limited_calls"):
        parts.append(f"{u['rate_limited_calls']:.0f} rate-limited call(s) it retried")
    signal = parse_error_text(report.text, now) if report.text else None
    if signal is not None and signal.limits:
        parts.append(f"rate-limit headers ({', '.join(f'{k}={v}' for k, v in sorted(signal.limits.items()))})")
    if signal is not None and signal.hard_stop:
        parts.append(f"a hard stop ({signal.hard_stop})")
    return " and ".join(parts)
