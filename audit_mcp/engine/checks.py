"""The field-level checks a submission goes through: texts, line numbers, arrays, and evidence in a file.

Each check records a precise, fixable problem (a JSON-pointer-like location and what to do) in an
``Outcome`` instead of raising, so one pass reports every mistake at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("critical", "high", "medium", "low", "info")
CONFIDENCES = ("high", "medium", "low")
STATUSES = ("reviewed", "not_applicable", "could_not_review")
ROLES_HINT = "e.g. source, sink, caller, validator"

MAX_PAYLOAD_CHARS = 1_000_000
MAX_FINDINGS_PER_TASK = 50
MAX_EVIDENCE_CHARS = 2_000
MAX_EVIDENCE_LINES = 40
MIN_EVIDENCE_CHARS = 8
MAX_RELATED = 10
EVIDENCE_SLACK_LINES = 3
MIN_SUMMARY_CHARS = 30
TEXT_CAPS = {
    "title": 200,
    "category": 100,
    "description": 4_000,
    "recommendation": 2_000,
    "symbol": 200,
    "summary": 2_000,
    "reason": 1_000,
}
VACUOUS_SUMMARY = re.compile(
    r"^\W*(no (obvious |apparent )?(issues|problems|findings)( found)?|looks (good|fine)|lgtm"
    r"|nothing (found|to report)|clean|ok)\W*$",
    re.I,
)
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Problem:
    location: str
    message: str


@dataclass
class Outcome:
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, float] = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return not self.errors

    def error(self, location: str, message: str) -> None:
        self.errors.append(Problem(location, message))

    def warn(self, location: str, message: str) -> None:
        self.warnings.append(Problem(location, message))


def squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def locate_evidence(lines: Sequence[str], evidence: str) -> list[tuple[int, int]]:
    """Every (start, end) 1-based line range where ``evidence`` appears, whitespace-insensitively.

    Blank lines are ignored on both sides; each evidence line must be contained
    in the corresponding file line, so the first and last may be partial.
    """
    wanted = [squash(x) for x in evidence.splitlines() if x.strip()]
    if not wanted:
        return []
    nonblank = [(i + 1, squash(text)) for i, text in enumerate(lines) if text.strip()]
    found = []
    for idx in range(len(nonblank) - len(wanted) + 1):
        if wanted[0] not in nonblank[idx][1]:
            continue
        if all(wanted[j] in nonblank[idx + j][1] for j in range(1, len(wanted))):
            found.append((nonblank[idx][0], nonblank[idx + len(wanted) - 1][0]))
    return found


def objects_in(out: Outcome, raw: list[Any], loc: str, not_an_object: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each item of an array that should hold objects, with its location; any other item is an error."""
    for k, item in enumerate(raw):
        if isinstance(item, dict):
            yield f"{loc}/{k}", item
        else:
            out.error(f"{loc}/{k}", not_an_object)


def text_field(out: Outcome, obj: Mapping[str, Any], key: str, loc: str, *, required: bool) -> str | None:
    value = obj.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            out.error(f"{loc}/{key}", f"'{key}' is required: give a non-empty string")
        return None
    if not isinstance(value, str):
        out.error(f"{loc}/{key}", f"'{key}' must be a string, not {type(value).__name__}")
        return None
    cap = TEXT_CAPS.get(key)
    if cap is not None and len(value) > cap:
        out.error(f"{loc}/{key}", f"'{key}' has {len(value)} characters; keep it under {cap}")
        return None
    return value.strip()


def line_field(out: Outcome, obj: Mapping[str, Any], key: str, loc: str) -> int | None:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        out.error(f"{loc}/{key}", f"'{key}' must be a whole line number (1-based), not {value!r}")
        return None
    if value < 1:
        out.error(f"{loc}/{key}", f"'{key}' is {value}; line numbers start at 1")
        return None
    return value
