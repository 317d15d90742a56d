"""Every bound on what reviewers send, and the checks a submission goes through.

Reviewer output is untrusted. Before anything is stored or learned:

- JSON text must be UTF-8 (a UTF-8 byte-order mark is dropped; UTF-16 and other bytes are refused),
  without ``NaN`` or ``Infinity``, nested at most ``MAX_JSON_DEPTH`` deep, with integers of at most
  ``MAX_INT_DIGITS`` digits (``decode_json``);
- every value is plain JSON: integers within ``±MAX_SAFE_INT``, finite floats, strings without lone
  surrogates and of at most ``MAX_STRING_CHARS``, at most ``MAX_JSON_NODES`` values in all
  (``value_problems``);
- free text loses its control characters (all but tab and newline) and bidirectional overrides
  (``clean_text``); texts, evidence, arrays and ``usage`` numbers have the caps below, which the models
  of ``inputs`` apply (and publish in the tools' schemas).

Each check records a precise, fixable problem (a JSON-pointer location and what to do) in an ``Outcome``
(or a list of pairs) instead of raising, so one pass reports every mistake at once.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("critical", "high", "medium", "low", "info")
CONFIDENCES = ("high", "medium", "low")
STATUSES = ("reviewed", "not_applicable", "could_not_review")
ROLES_HINT = "e.g. source, sink, caller, validator"

MAX_PAYLOAD_CHARS = 1_000_000
MAX_JSON_DEPTH = 32
MAX_JSON_NODES = 100_000
MAX_STRING_CHARS = 100_000
MAX_INT_DIGITS = 20
MAX_SAFE_INT = 2**53 - 1
MAX_FAILURE_TEXT_CHARS = 4_000
# What one subagent run may report in ``usage``: generous, finite, and never enough to poison the scheduler.
USAGE_BOUNDS: dict[str, float] = {
    "input_tokens": 100_000_000,
    "output_tokens": 10_000_000,
    "api_calls": 100_000,
    "seconds": 7 * 86_400,
    "rate_limited_calls": 100_000,
}
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
# A summary of a reviewed task names what was examined: at least this many words that are not filler.
MIN_SUMMARY_SUBSTANCE = 4
_FILLER = frozenset(
    re.findall(
        r"\S+",
        "all and any anything appear appears apparent are been but can check checked clean code concern "
        "concerns correct could did does done everything everything's file files fine finding findings for "
        "found from good great had has have here i'm i've issue issues it's its just lgtm look looked looks "
        "nice none not note noted nothing nothing's obvious okay our overall pretty problem problems really "
        "report reported review reviewed reviewing saw see seem seemed seems solid something spotted that the "
        "there these thing things this those too very was well were with without wrong yes",
    )
)
_WORD = re.compile(r"[^\W\d_][\w'./-]{2,}", re.UNICODE)
_WS = re.compile(r"\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


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


def vacuous(summary: str) -> bool:
    """True when a reviewed task's summary says nothing about what was examined ("looks good to me")."""
    if VACUOUS_SUMMARY.match(summary):
        return True
    words: set[str] = set()
    for match in _WORD.finditer(summary):  # stops at the words that settle it: summaries run long
        word = match.group().lower().strip("'./-")
        if word not in _FILLER:
            words.add(word)
            if len(words) >= MIN_SUMMARY_SUBSTANCE:
                return False
    return True


def clean_text(text: str) -> str:
    """Reviewer text as stored: line ends as ``\\n``, control characters and bidirectional overrides removed."""
    return _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; send a finite number (or leave the field out)")


def decode_json(raw: str | bytes) -> tuple[Any, str | None]:
    """Parse JSON text from outside: the value, or ``None`` and what is wrong with the text (never raises)."""
    if isinstance(raw, bytes):
        encoding = next((name for bom, name in _BOMS.items() if raw.startswith(bom)), None)
        if encoding is None and len(raw) >= 2 and (raw[0] == 0 or raw[1] == 0):
            encoding = "UTF-16"
        if encoding is not None:
            return None, f"the text is {encoding}; save it as UTF-8 and send it again"
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return None, (
                f"the text is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save it as UTF-8 "
                "and send it again"
            )
    text = raw.removeprefix("\ufeff")
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_int=_bounded_int, parse_float=_finite)
    except json.JSONDecodeError as exc:
        return None, f"the text is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    except RecursionError:
        return None, f"the JSON is nested more than {MAX_JSON_DEPTH} levels deep; results are shallow"
    except ValueError as exc:
        return None, f"the text is not valid JSON: {str(exc)[:200]}"
    return value, None


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:20]} is out of range for a number; send a finite number")
    return number


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"a number has {len(digits)} digits; line numbers and counts have at most {MAX_INT_DIGITS}")
    return int(digits)


# How the problems after which nothing of the value is read begin (too many values, too deep): reported alone.
STRUCTURAL = ("more than ", "nested more than ")


def value_problems(value: Any, root: str = "") -> tuple[list[tuple[str, str]], int]:
    """Every place where ``value`` is not plain, bounded JSON, and its size in characters (about its JSON).

    Iterative, so no nesting can exhaust the stack; it stops at ``MAX_JSON_NODES`` values.
    """
    problems: list[tuple[str, str]] = []
    size = 0
    # (the parent's location, the key or index under it, the value, its depth): a value's location is
    # written out only when it holds others or has a problem, not for every leaf.
    stack: list[tuple[str, str | int | None, Any, int]] = [(root, None, value, 0)]
    nodes = 0
    while stack:
        parent, key, item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_JSON_NODES:
            problems.append((root or "/", f"more than {MAX_JSON_NODES} values in all; send one result per task"))
            break
        if depth > MAX_JSON_DEPTH:
            problems.append(
                (_location(parent, key) or "/", f"nested more than {MAX_JSON_DEPTH} levels deep; results are shallow")
            )
            continue
        size += 8
        if isinstance(item, str):
            size += len(item)
            if problem := _string_problem(item):
                problems.append((_location(parent, key) or "/", problem))
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_SAFE_INT:
                problems.append(
                    (_location(parent, key) or "/", f"a number beyond ±{MAX_SAFE_INT}; send the real count or line")
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                problems.append(
                    (_location(parent, key) or "/", f"{item} is not a number JSON allows; send a finite number")
                )
        elif isinstance(item, Mapping):
            loc = _location(parent, key)
            for name, child in item.items():
                if not isinstance(name, str) or _string_problem(name):
                    problems.append((loc or "/", "an object key that is not plain UTF-8 text"))
                    continue
                size += len(name)
                stack.append((loc, name, child, depth + 1))
        elif isinstance(item, list | tuple):
            loc = _location(parent, key)
            stack.extend((loc, k, child, depth + 1) for k, child in enumerate(item))
        else:
            problems.append((_location(parent, key) or "/", f"a {type(item).__name__}, which is not a JSON value"))
    return sorted(problems), size


def _string_problem(text: str) -> str | None:
    if len(text) > MAX_STRING_CHARS:
        return f"a text of {len(text)} characters; texts are at most {MAX_STRING_CHARS}"
    if text.isascii():
        return None  # (no surrogate is ASCII)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"a lone surrogate (\\u{ord(text[exc.start]):04x}) at character {exc.start}, which is not UTF-8 text; "
            "send the characters themselves"
        )
    return None


def _location(parent: str, key: str | int | None) -> str:
    """The JSON pointer of the value under ``key`` of the value at ``parent`` (``parent`` itself for None)."""
    if key is None:
        return parent
    return f"{parent}/{_pointer(key) if isinstance(key, str) else key}"


def _pointer(key: str) -> str:
    text = key.replace("~", "~0").replace("/", "~1")
    return text if len(text) <= 60 else text[:57] + "..."


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


def answered_tasks(
    out: Outcome, results: Sequence[Any], cells: Mapping[str, Any], packet_id: str, fields: str
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """Each result that answers a task of the packet once, as (index, JSON location, item); errors for the rest
    (not an object, a task the packet does not hold, a task answered twice).

    ``fields`` names what a result holds, for the error on a result that is not an object.
    """
    seen: set[str] = set()
    for i, item in enumerate(results):
        loc = f"/results/{i}"
        if not isinstance(item, dict):
            out.error(loc, f"each result must be an object with {fields}")
            continue
        task_id = item.get("task_id")
        if not isinstance(task_id, str) or task_id not in cells:
            out.error(
                f"{loc}/task_id",
                f"task {task_id!r} is not in packet {packet_id}; its tasks are "
                f"{', '.join(sorted(cells))}. Answer exactly those.",
            )
            continue
        if task_id in seen:
            out.error(f"{loc}/task_id", f"task {task_id} is answered twice; keep one result per task")
            continue
        seen.add(task_id)
        yield i, loc, item
