"""The shape of the second opinions reviewers send: a context packet's threat model, a verifier's verdict.

Like ``inputs``, these pydantic models are the first half of the check (types, choices, bounds) and the
schema the prompts describe; ``opinion_validation`` does the rest (every path is the repository's, every
cited line says what it is cited for). The threat model is short by design: every review packet carries it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from audit_mcp.engine.checks import MAX_EVIDENCE_CHARS, MIN_EVIDENCE_CHARS, MIN_SUMMARY_CHARS, SEVERITIES

EXPOSURES = ("network", "local", "cli", "library", "build", "test", "other")
FINDING_VERDICTS = ("confirmed", "likely", "overstated", "false_positive")
OPINION_STATUSES = ("reviewed", "could_not_review")
MAX_CITED = 8
MAX_LIST = 24
_NON_BLANK = r"\S"


def _text(cap: int, description: str, *, min_length: int = 1) -> Any:
    return Field(pattern=_NON_BLANK, min_length=min_length, max_length=cap, description=description)


Path = Annotated[str, Field(max_length=500, description="A repo-relative path of a file or directory of the manifest.")]
Line = Annotated[int, Field(ge=1, strict=True, description="A 1-based line number of the file.")]


class _Input(BaseModel):
    model_config = ConfigDict(extra="ignore")


class EntryPoint(_Input):
    """Where outside input comes in."""

    path: Path
    name: str = _text(120, "What it is: 'POST /api/notes', 'the `notes` command', 'parse() of the public API'.")
    exposure: Literal[EXPOSURES] = Field(  # type: ignore[valid-type]
        description="Who can reach it: network (remote clients), local (same machine), cli (the user who runs "
        "it), library (callers of a public API), build, test or other."
    )
    reached_by: str = _text(200, "Who sends input there and what they control.")


class Boundary(_Input):
    """Where trust changes: input crosses from a less trusted party to a more trusted one."""

    description: str = _text(300, "What crosses, from whom to what.")
    paths: list[Path] = Field(min_length=1, max_length=8, description="The files or directories on it.")


class Asset(_Input):
    name: str = _text(120, "What an attacker wants or must not change: 'user passwords', 'the notes database'.")
    description: str = _text(300, "Where it lives and why it matters.")


class Sink(_Input):
    """An operation that is dangerous with untrusted input: SQL, shell, file paths, deserialization, HTML."""

    path: Path
    description: str = _text(200, "What the operation is and what reaches it.")
    symbol: str | None = Field(default=None, max_length=120, description="The function or method, if one.")


class Part(_Input):
    """A part of the repository that does not ship or serve: development-only, test-only or deprecated."""

    path: Path
    why: str = _text(200, "How you know (its name, the packaging metadata, a comment, the docs).")


class Control(_Input):
    """Existing hardening a reviewer should know about before calling something missing."""

    path: Path
    description: str = _text(200, "What it guards and how.")


class ThreatModel(_Input):
    """What the software is and where its risk lies, in a page: the run-level context of every review packet."""

    summary: str = _text(1_200, "What the software is, who runs it and who uses it, in a few sentences.", min_length=40)
    entry_points: list[EntryPoint] = Field(min_length=1, max_length=MAX_LIST)
    trust_boundaries: list[Boundary] = Field(default_factory=list, max_length=12)
    assets: list[Asset] = Field(default_factory=list, max_length=12)
    dangerous_sinks: list[Sink] = Field(default_factory=list, max_length=MAX_LIST)
    controls: list[Control] = Field(default_factory=list, max_length=16)
    development_only: list[Part] = Field(default_factory=list, max_length=MAX_LIST)
    test_only: list[Part] = Field(default_factory=list, max_length=MAX_LIST)
    deprecated: list[Part] = Field(default_factory=list, max_length=MAX_LIST)


class ContextResult(_Input):
    """The answer for a context packet's one task."""

    task_id: str
    status: Literal[OPINION_STATUSES]  # type: ignore[valid-type]
    summary: str = _text(2_000, "What you read to build the threat model.")
    reason: str | None = Field(default=None, max_length=1_000)
    threat_model: ThreatModel | None = None


class Citation(_Input):
    """A place the verdict rests on, quoted verbatim, checked against the file like a finding's evidence."""

    file: str = Field(max_length=500, description="Repo-relative path of any file of the repository.")
    start_line: Line
    end_line: Line
    quote: str = Field(
        min_length=MIN_EVIDENCE_CHARS,
        max_length=MAX_EVIDENCE_CHARS,
        description="The lines, copied verbatim (whole or partial lines, no line numbers, no '...').",
    )
    role: str | None = Field(default=None, max_length=60, description="control, guard, caller, sink, path ...")


class VerifyResult(_Input):
    """The answer for one verification task."""

    task_id: str
    status: Literal[OPINION_STATUSES]  # type: ignore[valid-type]
    summary: str = _text(2_000, f"What you checked to try to refute it (at least {MIN_SUMMARY_CHARS} characters).")
    reason: str | None = Field(default=None, max_length=1_000)
    verdict: Literal[FINDING_VERDICTS] | None = None  # type: ignore[valid-type]
    fair_severity: Literal[SEVERITIES] | None = None  # type: ignore[valid-type]
    same_defect: bool | None = Field(default=None, strict=True)
    rationale: str | None = Field(default=None, max_length=2_000)
    cited: list[Citation] | None = Field(default=None, max_length=MAX_CITED)


def _choice(name: str, choices: tuple[str, ...]) -> Callable[[Any], str]:
    return lambda v: f"{name} {v!r} is not one of {', '.join(choices)}"


MESSAGES: Mapping[str, Callable[[Any], str]] = {
    "exposure": _choice("exposure", EXPOSURES),
    "status": _choice("status", OPINION_STATUSES),
    "verdict": _choice("verdict", FINDING_VERDICTS),
    "fair_severity": _choice("fair_severity", SEVERITIES),
    "same_defect": lambda v: f"same_defect must be true or false, not {v!r}",
    "quote": lambda v: (
        f"'quote' must copy at least {MIN_EVIDENCE_CHARS} and at most {MAX_EVIDENCE_CHARS} "
        "characters verbatim from the file"
    ),
}
_TEXTS = {"name": 120, "reached_by": 200, "description": 300, "why": 200, "path": 500, "rationale": 2_000}


def _texts(key: str, cap: int) -> Callable[[Any], str]:
    def message(value: Any) -> str:
        if isinstance(value, str) and len(value) > cap:
            return f"'{key}' has {len(value)} characters; keep it under {cap}"
        return f"'{key}' is required: give a non-empty string (at most {cap} characters)"

    return message


MESSAGES = {
    **MESSAGES,
    **{key: _texts(key, cap) for key, cap in _TEXTS.items()},
    "summary": lambda v: (
        "'summary' must be a non-empty text: a task's summary says what you read (at most 2,000 "
        "characters); the threat model's summary says what the software is (40 to 1,200 characters)"
    ),
}
