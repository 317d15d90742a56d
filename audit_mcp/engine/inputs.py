"""The shape of what hosts and reviewers send: one set of pydantic models, the single definition of it.

They publish the ``submit_packet`` and ``merge_and_ingest`` input schemas (every field described, with its
bounds), and they are the first half of validation: ``shape_problems`` checks a value against a model and
turns each violation into the JSON-pointer location and fix message a reviewer gets. The second half, in
``validation``, needs the packet and the files (is the task in the packet, the file in the packet, the
evidence at its lines, every lead judged). The bounds come from ``checks``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from audit_mcp.engine.checks import (
    CONFIDENCES,
    MAX_EVIDENCE_CHARS,
    MAX_EVIDENCE_LINES,
    MAX_FINDINGS_PER_TASK,
    MAX_RELATED,
    MIN_EVIDENCE_CHARS,
    MIN_SUMMARY_CHARS,
    ROLES_HINT,
    SEVERITIES,
    STATUSES,
    TEXT_CAPS,
    USAGE_BOUNDS,
)
from audit_mcp.store.records import VERDICTS

USAGE_FIELDS = tuple(USAGE_BOUNDS)
_NON_BLANK = r"\S"


def _text(key: str, description: str) -> Any:
    return Field(pattern=_NON_BLANK, max_length=TEXT_CAPS.get(key), description=description)


Line = Annotated[int, Field(ge=1, strict=True, description="A 1-based line number of the file.")]


class _Input(BaseModel):
    # Unknown keys are ignored (hosts add their own); strict numbers: no booleans, no 3.0 for a line. Each
    # validator is built on its model's first use: a next_step that dispatches validates no answer.
    model_config = ConfigDict(extra="ignore", defer_build=True)


class RelatedLocation(_Input):
    """Another place the finding involves (a source, a sink, a caller), checked like the main one."""

    file: str = Field(description="Repo-relative path of any file of the repository.")
    start_line: Line
    end_line: Line
    role: str | None = Field(default=None, description=f"What the place is to the finding, {ROLES_HINT}.")


class Finding(_Input):
    """One defect, at one place, proven by a verbatim quote of its lines."""

    title: str = _text("title", "One line naming the defect.")
    severity: Literal[SEVERITIES] = Field(description="critical, high, medium, low or info, as the lens defines them.")  # type: ignore[valid-type]
    confidence: Literal[CONFIDENCES] = Field(description="How sure the evidence makes you: high, medium or low.")  # type: ignore[valid-type]
    category: str = _text(
        "category",
        "A CWE id where one fits (CWE-89), else one of the classes your lens lists (n-plus-one); other wording is "
        "filed under the nearest class or the lens's catch-all.",
    )
    file: str = Field(description="Repo-relative path of one of this packet's files.")
    start_line: Line
    end_line: Line
    evidence: str = Field(
        min_length=MIN_EVIDENCE_CHARS,
        max_length=MAX_EVIDENCE_CHARS,
        description=f"The smallest snippet that proves the finding, copied verbatim from the file at start_line-"
        f"end_line (whole or partial lines; no line numbers, no '...'): at least {MIN_EVIDENCE_CHARS} characters "
        f"besides repeated whitespace, at most {MAX_EVIDENCE_LINES} lines and {MAX_EVIDENCE_CHARS} characters.",
    )
    description: str = _text("description", "What is wrong, why it matters, and how it is reached.")
    recommendation: str = _text("recommendation", "How to fix it.")
    symbol: str | None = Field(
        default=None, max_length=TEXT_CAPS.get("symbol"), description="The enclosing function or class, if any."
    )
    related_locations: list[RelatedLocation] | None = Field(
        default=None, max_length=MAX_RELATED, description=f"Up to {MAX_RELATED} other places the finding involves."
    )


class LeadVerdict(_Input):
    """A judgement of one analyzer lead the packet carries."""

    lead_id: str = Field(description="The lead's id from the packet prompt, e.g. L001.")
    verdict: Literal[VERDICTS] = Field(description="confirmed (it is a real defect) or refuted (it is not).")  # type: ignore[valid-type]
    reason: str = _text("reason", "Why, citing the code you read.")


class Cited(_Input):
    """The lines a verdict on an earlier finding rests on, quoted verbatim (checked like a finding's evidence)."""

    file: str = Field(description="Repo-relative path of any file of the repository.")
    start_line: Line
    end_line: Line
    evidence: str = Field(
        min_length=MIN_EVIDENCE_CHARS,
        max_length=MAX_EVIDENCE_CHARS,
        description="The lines, copied verbatim from the file at start_line-end_line.",
    )


class EarlierAnswer(_Input):
    """A verdict on one finding an earlier audit reported in the task's lines (listed in the packet prompt)."""

    ref: str = Field(description="The earlier finding's reference from the packet prompt, e.g. E1.")
    verdict: Literal["still_present", "fixed", "wrong"] = Field(
        description="still_present (report it again as a finding too), fixed (cite the lines that fix it) or "
        "wrong (cite the control that makes the code safe)."
    )
    reason: str | None = Field(
        default=None, max_length=TEXT_CAPS.get("reason"), description="Why; required for fixed and wrong."
    )
    cited: Cited | None = Field(default=None, description="For fixed and wrong: the code that shows it.")


class TaskResult(_Input):
    """The answer for one task of the packet."""

    task_id: str = Field(description="The task's id from the packet prompt, e.g. T00012.")
    status: Literal[STATUSES] = Field(  # type: ignore[valid-type]
        description="reviewed (findings may be empty), not_applicable (the lens cannot apply; give a reason) or "
        "could_not_review (you could not finish; give a reason, the task is handed out again)."
    )
    summary: str = _text(
        "summary",
        f"What you examined (functions, inputs, sinks, searches) and, with no findings, why the code is clear; at "
        f"least {MIN_SUMMARY_CHARS} characters for a reviewed task. 'No obvious issues' is refused.",
    )
    reason: str | None = Field(
        default=None,
        max_length=TEXT_CAPS.get("reason"),
        description="Why the task is not_applicable or could_not_review (required for those).",
    )
    findings: list[Finding] | None = Field(
        default=None,
        max_length=MAX_FINDINGS_PER_TASK,
        description=f"The defects found (at most {MAX_FINDINGS_PER_TASK}); empty when there are none.",
    )
    leads: list[LeadVerdict] | None = Field(
        default=None, description="A verdict on every analyzer lead the packet carries for this task's file."
    )
    earlier: list[EarlierAnswer] | None = Field(
        default=None,
        max_length=MAX_FINDINGS_PER_TASK,
        description="A verdict on each earlier finding the packet prompt lists for this task; one left out stays open.",
    )


def _amount(key: str, what: str) -> Any:
    bound = USAGE_BOUNDS[key]
    return Field(default=None, ge=0, le=bound, allow_inf_nan=False, strict=True, description=f"{what} (0-{bound:g})")


class Usage(_Input):
    """What one review cost, as far as the reviewer knows; the scheduler sizes later waves from it."""

    input_tokens: float | None = _amount("input_tokens", "Input tokens the review used, all calls together.")
    output_tokens: float | None = _amount("output_tokens", "Output tokens the review produced.")
    api_calls: float | None = _amount("api_calls", "How many model calls the review made.")
    seconds: float | None = _amount("seconds", "How long the review took, in seconds.")
    rate_limited_calls: float | None = _amount(
        "rate_limited_calls", "Calls refused with a rate limit (429) and retried."
    )


class Submission(_Input):
    """A packet's answer as submit_packet takes it: every field described, with its bounds and choices (the tool's
    own schema is the skeleton of this one; this is the resource audit://schemas/submission)."""

    run_id: str = Field(description="The run's id, as the step and its dispatch plan give it (e.g. A1-R2-3f9c2a).")
    packet_id: str = Field(description="The packet's id, from the dispatch plan or its prompt (e.g. A1-R2-3f9c2a-P03).")
    results: list[TaskResult] = Field(description="One result per task of the packet.")
    usage: Usage | None = Field(default=None, description="What the review cost, as far as known.")


class Failure(_Input):
    """A packet whose subagent failed, with the error the host saw."""

    packet_id: str = Field(description="The failed packet's id.")
    error: str | None = Field(
        default=None, description="The error text the host saw, verbatim (it tells rate limits and timeouts apart)."
    )


_TEXTS = ("title", "category", "description", "recommendation", "symbol", "summary", "reason", "role")
_CHOICES = {"severity": SEVERITIES, "confidence": CONFIDENCES, "status": STATUSES, "verdict": VERDICTS}
_ARRAYS = {
    "findings": ("'findings' must be an array (empty when there are none)", "each finding must be an object"),
    "related_locations": (
        "'related_locations' must be an array of {file, start_line, end_line, role}",
        "each related location must be an object",
    ),
    "leads": (
        "'leads' must be an array of {lead_id, verdict, reason}",
        "each lead verdict must be an object {lead_id, verdict, reason}",
    ),
}


_DETAIL = frozenset({"description", "title", "examples", "pattern", "maxLength", "minLength", "maxItems", "default"})


def lean_schema(shape: Any) -> dict[str, Any]:
    """The JSON schema of ``shape`` (a model or a type over models) as its skeleton: types, required keys,
    choices and the line numbers' floor, without descriptions, text caps or defaults (the prompt that asks for
    the value states them, and the server's check names any it meets), an optional field as its type alone,
    and every definition inlined where it is used (the schema is embedded inside a tool's, where a reference
    to ``#/$defs`` would point at the tool's root)."""
    schema = TypeAdapter(shape).json_schema()
    definitions = schema.pop("$defs", {})

    def strip(node: Any, *, names: bool = False) -> Any:
        """``names``: ``node`` maps property names (a field called ``title`` or ``description`` stays)."""
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return strip(definitions[ref.removeprefix("#/$defs/")])
            options = node.get("anyOf")
            if not names and isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
                return strip(next(o for o in options if o != {"type": "null"}))
            return {
                k: strip(v, names=k == "properties" and not names) for k, v in node.items() if names or k not in _DETAIL
            }
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    lean: dict[str, Any] = strip(schema)
    return lean


def pointer(parts: Sequence[str | int]) -> str:
    """A JSON pointer (RFC 6901) from path parts."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, int | float | type(None)) else f"a {type(value).__name__}"


def _message(error: Mapping[str, Any], overrides: Mapping[str, Callable[[Any], str]]) -> str:
    """The fix message for one pydantic error, worded as the reviewer's prompt words the field."""
    kind, loc = error["type"], error["loc"]
    value = None if kind == "missing" else error.get("input")
    key = next((part for part in reversed(loc) if isinstance(part, str)), "")
    item_of = loc[-2] if len(loc) >= 2 and isinstance(loc[-1], int) else None
    if key in overrides:
        return overrides[key](value)
    if isinstance(item_of, str) and item_of in _ARRAYS and kind in ("model_type", "dict_type"):
        return _ARRAYS[item_of][1]
    if key in _ARRAYS and loc[-1] == key:
        if kind == "too_long":
            if key == "findings":
                return f"{len(value or ())} findings; at most {MAX_FINDINGS_PER_TASK} per task"
            return f"at most {MAX_RELATED} related locations"
        return _ARRAYS[key][0]
    if key in _CHOICES:
        return f"{key} {value!r} is not one of {', '.join(_CHOICES[key])}"
    if key in ("start_line", "end_line"):
        if kind == "greater_than_equal":
            return f"'{key}' is {value}; line numbers start at 1"
        return f"'{key}' must be a whole line number (1-based), not {_shown(value)}"
    if key == "evidence":
        if kind == "string_too_long":
            return _EVIDENCE_TOO_LONG
        return _EVIDENCE_TOO_SHORT
    if key == "file":
        return "'file' is required: the repo-relative path of the file"
    if key in USAGE_FIELDS:
        return f"'{key}' must be a finite number from 0 to {USAGE_BOUNDS[key]:g}, as counted"
    if key in _TEXTS:
        if kind == "string_too_long":
            return f"'{key}' has {len(str(value))} characters; keep it under {TEXT_CAPS[key]}"
        if value is None or kind == "string_pattern_mismatch":
            return f"'{key}' is required: give a non-empty string"
        return f"'{key}' must be a string, not {type(value).__name__}"
    return str(error.get("msg", "invalid value"))


_EVIDENCE_TOO_SHORT = f"'evidence' must quote at least {MIN_EVIDENCE_CHARS} characters copied verbatim from the file"
_EVIDENCE_TOO_LONG = (
    f"evidence is too long; quote the smallest proving snippet (at most {MAX_EVIDENCE_LINES} lines "
    f"and {MAX_EVIDENCE_CHARS} characters)"
)


def shape_problems(
    model: type[BaseModel],
    value: Any,
    at: Sequence[str | int] = (),
    overrides: Mapping[str, Callable[[Any], str]] | None = None,
) -> list[tuple[tuple[str | int, ...], str, str]]:
    """Every way ``value`` does not fit ``model``: (path inside ``value``, JSON pointer from the payload's root,
    fix message), in the order pydantic reports them. ``overrides`` words the message of a field by its key."""
    try:
        model.model_validate(value)
    except ValidationError as exc:
        return [
            (tuple(e["loc"]), pointer([*at, *e["loc"]]), _message(e, overrides or {}))
            for e in exc.errors(include_url=False)
        ]
    return []
