"""The repository's history in a new audit: the earlier findings each re-review is shown, and what becomes of
them when its packet is merged.

When an audit re-reviews a cell (its content changed since its latest review), the findings the latest
finished audit holds in those lines are recorded for the cell (``remember_earlier``) and its packet prompt
lists them. At the merge (``settle_earlier``), each one is:

- resolved ``fixed`` or ``wrong`` when the reviewer answered so, citing the code (checked at submission);
- left to the new report when the reviewer reported it again at the same place;
- resolved ``lines_gone`` when its evidence is no longer in the file;
- otherwise kept open: copied into this audit at the lines where its evidence now is, saying so. A reviewer
  who is silent about a finding never closes it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from audit_mcp.engine.checks import locate_evidence
from audit_mcp.findings.synthesis import category_id, fingerprint
from audit_mcp.store.records import CellKind, CellState, EarlierFinding, Resolution
from audit_mcp.store.tx import Tx

# What of a finding an earlier-finding record keeps (the rest is where the earlier audit stored it).
_KEPT = (
    "title",
    "severity",
    "confidence",
    "category",
    "category_id",
    "file",
    "start_line",
    "end_line",
    "evidence",
    "description",
    "recommendation",
    "symbol",
    "related_locations",
    "carried_from",
)

ReadLines = Callable[[str], "list[str] | None"]


def remember_earlier(tx: Tx, audit_id: int) -> int:
    """Record, for each review cell of a new audit still to be reviewed, the findings the latest finished
    audit before it holds in the cell's lines under its lens; returns how many."""
    baseline = tx.previous_audit(audit_id)
    if baseline is None:
        return 0
    by_place: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for raw in tx.findings(baseline.audit_id):
        by_place[(raw["file"], raw["lens"])].append(raw)
    if not by_place:
        return 0
    rows: list[EarlierFinding] = []
    for cell in tx.cells(audit_id, [CellState.PENDING], kinds=[CellKind.REVIEW.value]):
        for raw in by_place.get((cell.path, cell.lens), ()):
            if raw["end_line"] < cell.start_line or raw["start_line"] > cell.end_line:
                continue
            kept = {k: raw[k] for k in _KEPT if raw.get(k) is not None}
            kept["category_id"] = category_id(raw)
            kept.setdefault("carried_from", {"audit_id": baseline.audit_id, "git_head": baseline.git_head})
            fp = fingerprint(raw["file"], kept["category_id"], raw["evidence"])
            rows.append(EarlierFinding(cell.task_id, f"E{len(rows) + 1}", baseline.audit_id, fp, kept))
    tx.insert_earlier(audit_id, rows)
    return len(rows)


def settle_earlier(
    tx: Tx,
    audit_id: int,
    run_id: str,
    answered: Mapping[str, tuple[str, Mapping[str, Any] | None]],
    read_lines: ReadLines,
) -> dict[str, int]:
    """Settle the earlier findings of the tasks a merge covered. ``answered`` maps each covered review task to
    (its packet id, its result: ``None`` for a result with nothing but the status). Returns counts by outcome."""
    counts: dict[str, int] = defaultdict(int)
    earlier = tx.earlier_findings(audit_id, list(answered))
    lenses = {
        task_id: cell.lens for task_id, cell in tx.cells_by_id(audit_id, sorted({e.task_id for e in earlier})).items()
    }
    for e in earlier:
        packet_id, result = answered[e.task_id]
        verdicts = {a["ref"]: a for a in (result or {}).get("earlier", [])}
        answer = verdicts.get(e.ref)
        detail: dict[str, Any] = {"packet_id": packet_id, "run_id": run_id, "from_audit": e.from_audit}
        if answer is not None and answer["verdict"] in ("fixed", "wrong"):
            detail |= {"reason": answer.get("reason"), "cited": answer.get("cited"), "finding": e.finding}
            tx.insert_resolution(audit_id, Resolution(e.fingerprint, answer["verdict"], detail))
            counts[answer["verdict"]] += 1
            continue
        if _reported_again(e, (result or {}).get("findings", [])):
            counts["reported_again"] += 1
            continue
        lines = read_lines(e.finding["file"])
        places = locate_evidence(lines, e.finding["evidence"]) if lines is not None else []
        if not places:
            tx.insert_resolution(audit_id, Resolution(e.fingerprint, "lines_gone", detail | {"finding": e.finding}))
            counts["lines_gone"] += 1
            continue
        start, end = min(places, key=lambda p: abs(p[0] - int(e.finding["start_line"])))
        why = (
            "still present: the re-review said so"
            if answer is not None
            else "still open: the re-review was shown it and neither reported it again nor showed it fixed or wrong"
        )
        payload = {**e.finding, "start_line": start, "end_line": end, "kept_open": why}
        tx.insert_finding(audit_id, run_id, packet_id, e.task_id, lenses.get(e.task_id, "security"), payload)
        counts["kept_open"] += 1
    return dict(counts)


def _reported_again(e: EarlierFinding, findings: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the re-review reported this finding again: the same place (overlapping lines of its file)
    and the same category, or the same fingerprint."""
    for f in findings:
        same_file = f.get("file") == e.finding["file"]
        if same_file and fingerprint(f["file"], f.get("category_id") or "", f.get("evidence", "")) == e.fingerprint:
            return True
        overlap = same_file and not (f["end_line"] < e.finding["start_line"] or f["start_line"] > e.finding["end_line"])
        if overlap and f.get("category_id") == e.finding.get("category_id"):
            return True
    return False


def answered_tasks(accepted: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, Mapping[str, Any] | None]]:
    """The review tasks a merge covered, from its merge parts: task id -> (packet id, result or ``None`` for one
    plainly reviewed); a task its reviewer could not review is left out (its earlier findings wait for the
    review that comes)."""
    out: dict[str, tuple[str, Mapping[str, Any] | None]] = {}
    for packet_id, parts in accepted.items():
        for task_id in parts.get("reviewed", ()):
            out[task_id] = (packet_id, None)
        for result in parts.get("results", ()):
            if result.get("status") in ("reviewed", "not_applicable"):
                out[result["task_id"]] = (packet_id, result)
    return out


def audit_scope(tx: Tx, audit_id: int) -> str:
    """What a review packet of an incremental audit is told about the whole: how much is reviewed again and
    how much carries its earlier review (empty for an audit that reviews everything)."""
    counts = tx.cell_counts_by_kind(audit_id).get(CellKind.REVIEW.value, {})
    carried = counts.get(CellState.CARRIED.value, 0)
    if not carried:
        return ""
    total = sum(counts.values())
    return (
        f"This audit re-reviews what changed: {total - carried} of the repository's {total} review cells changed "
        "since their latest review (or were never reviewed); the other cells carry their earlier reviews and "
        "findings. Your files may depend on unchanged code, or be depended on: read it where a change reaches it."
    )
