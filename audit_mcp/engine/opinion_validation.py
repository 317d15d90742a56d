"""Checking a context packet's threat model and a verifier's verdicts before anything is stored.

Pure, like ``validation``: the packet's cells, a way to read the repository and the payload in; errors,
warnings and a normalised payload out, every message with its JSON-pointer location and its fix. A threat
model names only paths of the manifest (files, or directories holding some); a verdict cites real lines,
checked like a finding's evidence (found elsewhere in the file, the citation moves there with a warning).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from audit_mcp.core.errors import PathError
from audit_mcp.core.fs import normalize_relpath
from audit_mcp.engine.checks import (
    MAX_EVIDENCE_LINES,
    MIN_SUMMARY_CHARS,
    SEVERITIES,
    USAGE_BOUNDS,
    Outcome,
    answered_tasks,
    clean_text,
    locate_evidence,
    vacuous,
)
from audit_mcp.engine.inputs import Usage, shape_problems
from audit_mcp.engine.opinion_inputs import MESSAGES, ContextResult, VerifyResult
from audit_mcp.engine.opinion_prompts import PAIR
from audit_mcp.store.records import Cell

_NAMES = frozenset({"file", "path", "paths", "task_id"})
_PART_LISTS = ("development_only", "test_only", "deprecated")


def _clean(value: Any, key: str = "") -> Any:
    """Every text of a shape-checked value without control characters, trimmed (a quote keeps its indentation)."""
    if isinstance(value, str):
        if key in _NAMES:
            return value  # a path is compared with the manifest as sent (a file name may hold any character)
        return clean_text(value).strip("\n") if key == "quote" else clean_text(value).strip()
    if isinstance(value, list):
        return [_clean(v, key) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v, k) for k, v in value.items() if v is not None}
    return value


class _Opinions(ABC):
    """What both validators share: one result per task of the packet, usage, summaries."""

    model: type[ContextResult] | type[VerifyResult]

    def __init__(self, packet_id: str, cells: Sequence[Cell]) -> None:
        self.packet_id = packet_id
        self.cells = {c.task_id: c for c in cells}

    def validate(self, results: Any, usage: Any = None) -> Outcome:
        out = Outcome()
        if not isinstance(results, list):
            out.error("/results", "'results' must be a JSON array with one object per task of the packet")
            return out
        seen: set[str] = set()
        for i, loc, item in answered_tasks(out, results, self.cells, self.packet_id, "task_id, status and summary"):
            task_id = item["task_id"]
            seen.add(task_id)
            before = len(out.errors)
            shape = shape_problems(self.model, item, ("results", i), MESSAGES)
            for _, where, message in shape:
                out.error(where, message)
            if shape:
                continue
            normalized = self._task(out, _clean(item), self.cells[task_id], loc)
            if normalized is not None and len(out.errors) == before:
                out.results.append(normalized)
        for task_id in sorted(self.cells.keys() - seen):
            out.error(
                "/results", f"task {task_id} has no result; add one (status could_not_review with a reason if need be)"
            )
        if usage is not None:
            out.usage = _usage(out, usage)
        return out

    @abstractmethod
    def _task(self, out: Outcome, item: dict[str, Any], cell: Cell, loc: str) -> dict[str, Any] | None:
        """One task's result, checked and normalized; None (with errors in ``out``) when it cannot be kept."""

    @staticmethod
    def _head(out: Outcome, item: Mapping[str, Any], loc: str) -> dict[str, Any] | None:
        """task_id, status, summary and reason, checked; None when the task was not finished."""
        head = {"task_id": item["task_id"], "status": item["status"], "summary": item["summary"]}
        if item["status"] == "could_not_review":
            if not item.get("reason"):
                out.error(f"{loc}/reason", "'reason' is required with could_not_review: say what stopped you")
            head["reason"] = item.get("reason", "")
            return None if not item.get("reason") else head
        summary = item["summary"]
        if len(summary) < MIN_SUMMARY_CHARS or vacuous(summary):
            out.error(
                f"{loc}/summary",
                "the summary must say what you read and checked (files, functions, callers, controls); "
                "'looks fine' is not an answer",
            )
        return head


def _usage(out: Outcome, usage: Any) -> dict[str, float]:
    if not isinstance(usage, dict):
        out.error("/usage", '\'usage\' must be an object such as {"input_tokens": 1200, "seconds": 95}')
        return {}
    problems = shape_problems(Usage, usage, ("usage",))
    for _, where, message in problems:
        out.error(where, message)
    bad = {path[0] for path, _, _ in problems}
    return {k: float(usage[k]) for k in USAGE_BOUNDS if usage.get(k) is not None and k not in bad}


class ContextValidator(_Opinions):
    """A context packet's answer: a threat model whose every path is one of the repository's."""

    model = ContextResult

    def __init__(self, packet_id: str, cells: Sequence[Cell], known_path: Callable[[str], bool]) -> None:
        super().__init__(packet_id, cells)
        self._known_path = known_path

    def _task(self, out: Outcome, item: dict[str, Any], cell: Cell, loc: str) -> dict[str, Any] | None:
        head = self._head(out, item, loc)
        if item["status"] == "could_not_review":
            return head
        model = item.get("threat_model")
        if not model:
            out.error(f"{loc}/threat_model", "a reviewed context task must carry the threat_model object")
            return None
        for pointer, raw in _paths(model, f"{loc}/threat_model"):
            self._check_path(out, pointer, raw, model)
        if head is None:
            return None
        return head | {"threat_model": model}

    def _check_path(self, out: Outcome, pointer: str, raw: str, model: dict[str, Any]) -> None:
        try:
            path = normalize_relpath(raw.rstrip("/")) if raw.strip("/") else "."
        except PathError as exc:
            out.error(pointer, str(exc))
            return
        if path != "." and not self._known_path(path):
            out.error(
                pointer,
                f"'{raw}' is not a file or directory of this repository's manifest; name paths exactly as the "
                "packet's tree lists them (repo-relative, no globs)",
            )
            return
        _set(model, pointer, path)


def _paths(model: Mapping[str, Any], base: str) -> list[tuple[str, str]]:
    """(JSON pointer, path) of every path a threat model names."""
    found = []
    for key in ("entry_points", "dangerous_sinks", "controls", *_PART_LISTS):
        for i, item in enumerate(model.get(key, [])):
            found.append((f"{base}/{key}/{i}/path", item["path"]))
    for i, boundary in enumerate(model.get("trust_boundaries", [])):
        for j, path in enumerate(boundary["paths"]):
            found.append((f"{base}/trust_boundaries/{i}/paths/{j}", path))
    return found


def _set(model: dict[str, Any], pointer: str, value: str) -> None:
    """Store a normalised path back at its place (the pointer's parts after ``threat_model``)."""
    parts = pointer.split("/threat_model/", 1)[1].split("/")
    target: Any = model
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last = parts[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value


class VerifyValidator(_Opinions):
    """A verifier's answers: a verdict (or, for a doubtful pair, whether it is one defect) citing real lines.

    ``claimed`` maps each task to the severity its finding was reported with, or ``PAIR`` for a pair.
    """

    model = VerifyResult

    def __init__(
        self,
        packet_id: str,
        cells: Sequence[Cell],
        claimed: Mapping[str, str],
        read_lines: Callable[[str], list[str] | None],
        known_files: Callable[[str], bool],
    ) -> None:
        super().__init__(packet_id, cells)
        self._claimed = claimed
        self._read_lines = read_lines
        self._known_files = known_files
        self._cache: dict[str, list[str] | None] = {}

    def _task(self, out: Outcome, item: dict[str, Any], cell: Cell, loc: str) -> dict[str, Any] | None:
        head = self._head(out, item, loc)
        if item["status"] == "could_not_review":
            return head
        claimed = self._claimed.get(cell.task_id, "")
        answer: dict[str, Any] = {}
        if claimed == PAIR:
            if item.get("same_defect") is None:
                out.error(
                    f"{loc}/same_defect",
                    "this task asks whether two findings are one defect: give same_defect true (one fix settles "
                    "both) or false (two distinct defects)",
                )
            if item.get("verdict") is not None:
                out.error(f"{loc}/verdict", "a pair task answers same_defect only; leave verdict out")
            answer["same_defect"] = item.get("same_defect")
        else:
            answer |= self._verdict(out, item, loc, claimed)
        if not item.get("rationale"):
            out.error(
                f"{loc}/rationale",
                "'rationale' is required: say why, naming the control that defeats the finding, the "
                "precondition it needs, or the path that makes it real",
            )
        answer["rationale"] = item.get("rationale", "")
        given = item.get("cited") or []
        if not given:
            out.error(
                f"{loc}/cited", "cite at least one place your verdict rests on: {file, start_line, end_line, quote}"
            )
        answer["cited"] = [c for k, raw in enumerate(given) if (c := self._cite(out, raw, f"{loc}/cited/{k}"))]
        return None if head is None else head | answer

    @staticmethod
    def _verdict(out: Outcome, item: Mapping[str, Any], loc: str, claimed: str) -> dict[str, Any]:
        verdict, fair = item.get("verdict"), item.get("fair_severity")
        if verdict is None:
            out.error(f"{loc}/verdict", "give a verdict: confirmed, likely, overstated or false_positive")
            return {}
        if item.get("same_defect") is not None:
            out.error(f"{loc}/same_defect", "same_defect belongs to pair tasks only; leave it out")
        if verdict == "overstated":
            if fair is None:
                out.error(f"{loc}/fair_severity", f"an overstated finding needs the fair severity (it was {claimed})")
            elif claimed in SEVERITIES and SEVERITIES.index(fair) <= SEVERITIES.index(claimed):
                lower = ", ".join(SEVERITIES[SEVERITIES.index(claimed) + 1 :]) or "none"
                out.error(
                    f"{loc}/fair_severity",
                    f"the finding was reported as {claimed}; an overstated one is fairly rated lower ({lower}). "
                    "If it is as severe as reported, the verdict is confirmed or likely",
                )
            return {"verdict": verdict, "fair_severity": fair}
        if fair is not None and fair != claimed:
            out.error(
                f"{loc}/fair_severity",
                f"a {verdict} verdict keeps the reported severity ({claimed}); use overstated to lower it, "
                "or leave fair_severity out",
            )
        return {"verdict": verdict}

    def _lines(self, path: str) -> list[str] | None:
        if path not in self._cache:
            self._cache[path] = self._read_lines(path)
        return self._cache[path]

    def _cite(self, out: Outcome, raw: Mapping[str, Any], loc: str) -> dict[str, Any] | None:
        try:
            path = normalize_relpath(raw["file"])
        except PathError as exc:
            out.error(f"{loc}/file", str(exc))
            return None
        lines = self._lines(path) if self._known_files(path) else None
        if lines is None:
            out.error(f"{loc}/file", f"'{raw['file']}' is not a readable file of this repository's manifest")
            return None
        start, end, quote = raw["start_line"], raw["end_line"], raw["quote"]
        if end < start or end > len(lines):
            out.error(f"{loc}/end_line", f"lines {start}-{end} are not inside {path}, which has {len(lines)} lines")
            return None
        if len(quote.splitlines()) > MAX_EVIDENCE_LINES:
            out.error(f"{loc}/quote", f"quote at most {MAX_EVIDENCE_LINES} lines: the smallest proving snippet")
            return None
        matches = locate_evidence(lines, quote)
        if not matches:
            out.error(
                f"{loc}/quote",
                f"the quote does not appear in {path} (checked the whole file, whitespace-insensitively); copy "
                "the lines verbatim, without line numbers or edits",
            )
            return None
        if not any(start <= a and b <= end for a, b in matches):
            start, end = min(matches, key=lambda m: abs(m[0] - start))
            out.warn(f"{loc}/start_line", f"the quote is at lines {start}-{end} of {path}; the citation moved there")
        return {
            "file": path,
            "start_line": start,
            "end_line": end,
            "quote": quote.strip("\n"),
            "role": raw.get("role") or "cited",
        }
