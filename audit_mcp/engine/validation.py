"""Validation of a packet's results, before anything reaches the coverage matrix.

Pure: the packet's tasks, a way to read the repository's files, and the raw
payload in; errors, warnings and a normalised payload out. Every message
names where the problem is (a JSON-pointer location) and how to fix it.

Two halves. The shape (types, choices, bounds, required fields) is the models
of ``inputs``, which also publish the tools' input schemas, so the schema a
host reads and the checks it meets are one definition. Then what only the
packet and the files can tell: the task is the packet's, the file is the
packet's and the lines are in it, the evidence is really there, every lead
carried is judged, a summary says what was examined.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from audit_mcp.core.errors import PathError
from audit_mcp.core.fs import normalize_relpath
from audit_mcp.core.taxonomy import classify
from audit_mcp.engine.checks import (
    EVIDENCE_SLACK_LINES,
    MAX_EVIDENCE_CHARS,
    MAX_EVIDENCE_LINES,
    MIN_EVIDENCE_CHARS,
    MIN_SUMMARY_CHARS,
    USAGE_BOUNDS,
    Outcome,
    answered_tasks,
    clean_text,
    locate_evidence,
    squash,
    vacuous,
)
from audit_mcp.engine.earlier_checks import check_earlier
from audit_mcp.engine.inputs import TaskResult, Usage, shape_problems
from audit_mcp.store.records import Cell, Lead


class PacketValidator:
    """Checks one submission against one packet's tasks and the files they name."""

    def __init__(
        self,
        packet_id: str,
        cells: Sequence[Cell],
        read_lines: Callable[[str], list[str] | None],
        known_files: Callable[[str], bool],
        leads: Sequence[Lead] = (),
        earlier: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        self.packet_id = packet_id
        self.leads = {x.lead_id: x for x in leads}
        self.earlier = earlier or {}  # task id -> the references of its earlier findings (E1 ...)
        self.cells = {c.task_id: c for c in cells}
        self.packet_files = sorted({c.path for c in cells})
        self._read_lines = read_lines
        self._known_files = known_files
        self._cache: dict[str, list[str] | None] = {}

    def _lines(self, path: str) -> list[str] | None:
        if path not in self._cache:
            self._cache[path] = self._read_lines(path)
        return self._cache[path]

    def validate(self, results: Any, usage: Any = None) -> Outcome:
        out = Outcome()
        if not isinstance(results, list):
            out.error("/results", "'results' must be a JSON array with one object per task of the packet")
            return out
        seen: set[str] = set()
        fields = "task_id, status, summary and findings"
        for _, loc, item in answered_tasks(out, results, self.cells, self.packet_id, fields):
            task_id = item["task_id"]
            seen.add(task_id)
            normalized = self._task(out, item, self.cells[task_id], loc)
            if normalized is not None:
                out.results.append(normalized)
        self._check_leads_answered(out, results)
        for task_id in sorted(self.cells.keys() - seen):
            cell = self.cells[task_id]
            out.error(
                "/results",
                f"task {task_id} ({cell.path} lines {cell.start_line}-{cell.end_line}, lens {cell.lens}) has no "
                "result; add one (use status could_not_review with a reason if you could not review it)",
            )
        if usage is not None:
            out.usage = self._usage(out, usage)
        return out

    def _usage(self, out: Outcome, usage: Any) -> dict[str, float]:
        if not isinstance(usage, dict):
            out.error("/usage", '\'usage\' must be an object such as {"input_tokens": 1200, "seconds": 95}')
            return {}
        problems = shape_problems(Usage, usage, ("usage",))
        for _, where, message in problems:
            out.error(where, message)
        bad = {path[0] for path, _, _ in problems}
        return {k: float(usage[k]) for k in USAGE_BOUNDS if usage.get(k) is not None and k not in bad}

    def _task(self, out: Outcome, item: Mapping[str, Any], cell: Cell, loc: str) -> dict[str, Any] | None:
        errors_before = len(out.errors)
        shape = shape_problems(TaskResult, item, ("results", int(loc.rsplit("/", 1)[1])), self._lead_messages)
        for _, where, message in shape:
            out.error(where, message)
        bad = {path[:2] for path, _, _ in shape}  # ("summary",), ("findings", 2), ("leads", 0) ...
        status = item.get("status")
        summary = _text(out, item, "summary", loc, required=("summary",) not in bad)
        if summary is not None and status == "reviewed" and (len(summary) < MIN_SUMMARY_CHARS or vacuous(summary)):
            out.error(
                f"{loc}/summary",
                "the summary must say what you examined (functions, inputs, sinks, searches) and, with no "
                "findings, why the code is clear; 'no obvious issues' is not an answer",
            )
        needs_reason = status in ("not_applicable", "could_not_review") and ("reason",) not in bad
        given_reason = item.get("reason")
        reason = _text(out, item, "reason", loc, required=needs_reason)
        if needs_reason and (not isinstance(given_reason, str) or not given_reason.strip()):
            out.error(f"{loc}/reason", "'reason' is required: give a non-empty string")
        given = item.get("findings")
        raw_findings: list[Any] = given if isinstance(given, list) else []
        if raw_findings and status != "reviewed":
            out.error(f"{loc}/findings", f"a task with status {status} cannot carry findings; use status reviewed")
        findings = []
        if ("findings",) not in bad:
            for j, raw in enumerate(raw_findings):
                # A finding whose shape is wrong in some fields still has the others checked (its place, its
                # evidence), so one refusal names every problem the reviewer has to fix.
                fields = {path[2] for path, _, _ in shape if path[:2] == ("findings", j) and len(path) > 2}
                if not isinstance(raw, Mapping) or (("findings", j) in bad and not fields):
                    continue
                finding = self._finding(out, raw, cell, f"{loc}/findings/{j}", {str(f) for f in fields})
                if finding is not None:
                    findings.append(finding)
        leads = item.get("leads") if ("leads",) not in bad else None
        verdicts = self._verdicts(out, leads, cell, status, loc, {b[1] for b in bad if len(b) == 2 and b[0] == "leads"})
        answers = check_earlier(
            out,
            item.get("earlier") if ("earlier",) not in bad else None,
            cell,
            status,
            loc,
            self.earlier.get(cell.task_id, ()),
            {int(b[1]) for b in bad if len(b) == 2 and b[0] == "earlier"},
            lambda o, obj, where: self._location(o, obj, where, allowed=None),
            self._check_evidence,
            lambda o, obj, key, where: _text(o, obj, key, where, required=False),
        )
        if len(out.errors) > errors_before:
            return None
        result: dict[str, Any] = {"task_id": cell.task_id, "status": status, "summary": summary, "findings": findings}
        if reason:
            result["reason"] = reason
        if verdicts:
            result["leads"] = verdicts
        if answers:
            result["earlier"] = answers
        return result

    @property
    def _lead_messages(self) -> dict[str, Callable[[Any], str]]:
        known = ", ".join(sorted(self.leads)) or "none"
        return {"lead_id": lambda v: f"lead {v!r} is not carried by packet {self.packet_id}; its leads are: {known}"}

    def _location(
        self, out: Outcome, obj: Mapping[str, Any], loc: str, *, allowed: Sequence[str] | None
    ) -> tuple[str, int, int, list[str]] | None:
        raw_file = obj["file"]  # its shape is checked: a string, and whole line numbers from 1
        try:
            path = normalize_relpath(raw_file)
        except PathError as exc:
            out.error(f"{loc}/file", str(exc))
            return None
        if allowed is not None and path not in allowed:
            out.error(
                f"{loc}/file",
                f"'{raw_file}' is not a file of packet {self.packet_id}; report findings only in "
                f"{', '.join(allowed)} (mention other files under related_locations)",
            )
            return None
        if allowed is None and not self._known_files(path):
            out.error(f"{loc}/file", f"'{raw_file}' is not a file of this repository's manifest")
            return None
        lines = self._lines(path)
        if lines is None:
            out.error(f"{loc}/file", f"'{raw_file}' cannot be read inside the repository root; check the path")
            return None
        start, end = obj["start_line"], obj["end_line"]
        if end < start:
            out.error(f"{loc}/end_line", f"end_line {end} is before start_line {start}")
            return None
        if end > len(lines):
            out.error(
                f"{loc}/end_line",
                f"line {end} is past the end of {path}, which has {len(lines)} lines; use lines 1-{len(lines)}",
            )
            return None
        return path, start, end, lines

    def _finding(
        self, out: Outcome, raw: Mapping[str, Any], cell: Cell, loc: str, bad: set[str] | None = None
    ) -> dict[str, Any] | None:
        """The second half for a finding: its place, its evidence, its related places, for every field whose
        shape is right (``bad`` names those that are not; their errors are already out)."""
        bad = bad or set()
        before = len(out.errors)
        title = _text(out, raw, "title", loc, required="title" not in bad)
        category = _text(out, raw, "category", loc, required="category" not in bad)
        description = _text(out, raw, "description", loc, required="description" not in bad)
        recommendation = _text(out, raw, "recommendation", loc, required="recommendation" not in bad)
        symbol = _text(out, raw, "symbol", loc, required=False) if "symbol" not in bad else None
        severity, confidence = raw.get("severity"), raw.get("confidence")
        where = {"file", "start_line", "end_line"}
        place = self._location(out, raw, loc, allowed=self.packet_files) if not bad & where else None
        if "evidence" in bad or not isinstance(raw.get("evidence"), str):
            return None
        quoted: str = raw["evidence"]
        evidence: str | None = quoted
        if len(squash(quoted)) < MIN_EVIDENCE_CHARS:
            out.error(
                f"{loc}/evidence",
                f"'evidence' must quote at least {MIN_EVIDENCE_CHARS} characters copied verbatim from the file",
            )
            evidence = None
        elif len(quoted.splitlines()) > MAX_EVIDENCE_LINES:
            out.error(
                f"{loc}/evidence",
                f"evidence is too long; quote the smallest proving snippet (at most {MAX_EVIDENCE_LINES} lines "
                f"and {MAX_EVIDENCE_CHARS} characters)",
            )
            evidence = None
        related = self._related(out, raw.get("related_locations"), loc) if "related_locations" not in bad else []
        if place is None or evidence is None:
            return None
        path, start, end, lines = place
        start, end = self._check_evidence(out, loc, path, start, end, lines, evidence)
        if start == 0 or bad or len(out.errors) > before:
            return None
        if path == cell.path and (
            end < cell.start_line - EVIDENCE_SLACK_LINES or start > cell.end_line + EVIDENCE_SLACK_LINES
        ):
            out.warn(
                f"{loc}/start_line",
                f"lines {start}-{end} are outside this task's range {cell.start_line}-{cell.end_line}",
            )
        filed = classify(category or "", cell.lens)
        if filed.basis == "lens":
            out.warn(
                f"{loc}/category",
                f"category {category!r} names no CWE id or listed class, so it is filed as {filed.category_id!r}; "
                "give a CWE id (CWE-89) where one fits, else one of the classes your lens lists",
            )
        finding: dict[str, Any] = {
            "title": title,
            "severity": severity,
            "confidence": confidence,
            "category": category,
            "category_id": filed.category_id,
            "file": path,
            "start_line": start,
            "end_line": end,
            "evidence": evidence.strip("\n"),
            "description": description,
            "recommendation": recommendation,
        }
        if symbol:
            finding["symbol"] = symbol
        if related:
            finding["related_locations"] = related
        return finding

    def _check_evidence(
        self, out: Outcome, loc: str, path: str, start: int, end: int, lines: list[str], evidence: str
    ) -> tuple[int, int]:
        matches = locate_evidence(lines, evidence)
        if any(start <= m[0] and m[1] <= end for m in matches):
            return start, end
        if matches:
            best = min(matches, key=lambda m: abs(m[0] - start))
            out.warn(
                f"{loc}/start_line",
                f"the evidence is at lines {best[0]}-{best[1]} of {path}, not {start}-{end}; the finding was "
                f"moved to lines {best[0]}-{best[1]}",
            )
            return best
        out.error(
            f"{loc}/evidence",
            f"the evidence does not appear in {path} (checked the whole file, whitespace-insensitively); copy "
            f"the lines verbatim from the file, without line numbers or edits, and give the lines they are on",
        )
        return 0, 0

    def _verdicts(
        self, out: Outcome, raw: Any, cell: Cell, status: Any, loc: str, bad: set[Any]
    ) -> list[dict[str, str]]:
        """The task's verdicts on the analyzer leads of its file (``leads`` is optional: results without it
        are read as before); ``bad`` holds the indexes whose shape is already refused."""
        if not raw:
            return []
        if status != "reviewed":
            out.error(f"{loc}/leads", f"a task with status {status} cannot judge leads; use status reviewed")
            return []
        clean = []
        for k, item in enumerate(raw):
            if k in bad:
                continue
            vloc = f"{loc}/leads/{k}"
            lead = self.leads.get(item["lead_id"])
            if lead is None:
                out.error(f"{vloc}/lead_id", self._lead_messages["lead_id"](item["lead_id"]))
                continue
            if lead.path != cell.path:
                out.error(
                    f"{vloc}/lead_id",
                    f"lead {lead.lead_id} is in {lead.path}; judge it in the result of a "
                    f"task on that file, not {cell.path}",
                )
                continue
            why = _text(out, item, "reason", vloc, required=True)
            if why is not None:
                clean.append({"lead_id": lead.lead_id, "verdict": item["verdict"], "reason": why})
        return clean

    def _check_leads_answered(self, out: Outcome, results: Sequence[Any]) -> None:
        judged = set()
        for item in results:
            answers = item.get("leads") if isinstance(item, dict) else None
            if isinstance(answers, list):
                judged |= {v.get("lead_id") for v in answers if isinstance(v, dict)}
        reviewed_files = {
            self.cells[item["task_id"]].path
            for item in results
            if isinstance(item, dict) and item.get("task_id") in self.cells and item.get("status") == "reviewed"
        }
        for lead in self.leads.values():
            if lead.lead_id in judged or lead.path not in reviewed_files:
                continue
            out.error(
                "/results",
                f"lead {lead.lead_id} ({lead.tool} {lead.rule_id} at {lead.path}:{lead.start_line}) has no verdict; "
                f'add {{"lead_id": "{lead.lead_id}", "verdict": "confirmed" or "refuted", '
                f'"reason": "..."}} to \'leads\' in the result of a task on {lead.path}',
            )

    def _related(self, out: Outcome, raw: Any, loc: str) -> list[dict[str, Any]]:
        clean = []
        for k, item in enumerate(raw or []):
            rloc = f"{loc}/related_locations/{k}"
            place = self._location(out, item, rloc, allowed=None)
            role = _text(out, item, "role", rloc, required=False) or "related"
            if place is not None:
                clean.append({"file": place[0], "start_line": place[1], "end_line": place[2], "role": role[:60]})
        return clean


def _text(out: Outcome, obj: Mapping[str, Any], key: str, loc: str, *, required: bool) -> str | None:
    """A text field whose shape is checked, as stored: control characters gone, trimmed; None when absent.
    A required one left empty by the cleaning is refused."""
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    cleaned = clean_text(value).strip()
    if not cleaned and required:
        out.error(f"{loc}/{key}", f"'{key}' holds only control characters; give a non-empty string")
    return cleaned or None
