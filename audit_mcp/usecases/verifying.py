"""The verification obligation: after review, a second opinion on what matters most.

Each finding at or above ``verify_severity`` (default ``high``) and each pair the deduplicator was unsure
of becomes a verify cell of the coverage matrix, so an audit is complete only once they are answered.
Planning is idempotent: a subject (a finding by any of its fingerprints, or a pair) gets one cell, and
findings that appear later (a changed file reviewed again) get theirs on the next pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.findings.synthesis import SEVERITY_RANK, Finding, Synthesis, synthesize
from audit_mcp.store.records import DONE_STATES, Cell, CellKind, CellState, VerdictRow
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace

if TYPE_CHECKING:
    from audit_mcp.engine.opinion_prompts import VerifyTask

VERIFY_LENS = CellKind.VERIFY.value


@dataclass(frozen=True)
class Due:
    """A subject that needs a verify cell."""

    subject: str
    path: str
    start_line: int
    end_line: int
    what: str  # "finding" or "pair"


def judged_same(verdicts: Sequence[VerdictRow]) -> list[tuple[str, str]]:
    """The fingerprint pairs verifiers judged to be one defect."""
    out = []
    for row in verdicts:
        if row.subject.startswith("pair:") and row.answer.get("same_defect") is True:
            _, a, b = row.subject.split(":", 2)
            out.append((a, b))
    return out


def current_synthesis(tx: Tx, audit_id: int) -> Synthesis:
    """The audit's findings merged as the report merges them (pairs judged one defect included)."""
    return synthesize(tx.findings(audit_id), same=judged_same(tx.finding_verdicts(audit_id)))


def _covered(subjects: set[str], finding: Finding) -> bool:
    return any(f"finding:{alias}" in subjects for alias in finding.aliases)


def _pair_covered(pairs: list[tuple[str, str]], a: Finding, b: Finding) -> bool:
    return any((x in a.aliases and y in b.aliases) or (x in b.aliases and y in a.aliases) for x, y in pairs)


def subjects_due(tx: Tx, audit_id: int, config: SessionConfig, synthesis: Synthesis | None = None) -> list[Due]:
    """What needs a second opinion and has no verify cell yet (nothing when the pass is off).

    ``synthesis`` is the audit's current one, when the caller has it already (before assessment).
    """
    if not config.verification_pass:
        return []
    synthesis = synthesis or current_synthesis(tx, audit_id)
    cells = tx.cells(audit_id, kinds=[CellKind.VERIFY])
    subjects = {c.subject for c in cells if c.subject}
    pairs = [tuple(s.split(":", 2)[1:]) for s in subjects if s.startswith("pair:")]
    threshold = SEVERITY_RANK[config.verify_severity]
    due = [
        Due(f"finding:{f.fingerprint}", f.file, f.start_line, f.end_line, "finding")
        for f in synthesis.findings
        if SEVERITY_RANK[f.severity] <= threshold and not _covered(subjects, f)
    ]
    for doubt in synthesis.doubtful:
        if _pair_covered(pairs, doubt.first, doubt.second):  # type: ignore[arg-type]
            continue
        spans = [*doubt.first.locations, *doubt.second.locations]
        due.append(Due(doubt.subject, doubt.first.file, min(a for a, _ in spans), max(b for _, b in spans), "pair"))
    return due


def plan_verification(ws: Workspace, config: SessionConfig) -> None:
    """Add a verify cell for every subject due, in one transaction."""
    with ws.store.write() as tx:
        plan_in(tx, ws.require_audit(tx).audit_id, config, ws.now())


def review_done(tx: Tx, audit_id: int) -> bool:
    """No context or review cell is pending or assigned: the findings are all in."""
    counts = tx.cell_counts_by_kind(audit_id)
    return not any(
        counts.get(kind, {}).get(state, 0)
        for kind in (CellKind.CONTEXT, CellKind.REVIEW)
        for state in (CellState.PENDING, CellState.ASSIGNED)
    )


def plan_in(tx: Tx, audit_id: int, config: SessionConfig, now: str) -> int:
    """Add a verify cell for every subject due, inside the caller's transaction; returns how many."""
    due = subjects_due(tx, audit_id, config)
    if not due:
        return 0
    number = tx.max_task_number(audit_id, CellKind.VERIFY)
    cells = []
    for n, item in enumerate(due, number + 1):
        row = tx.file(audit_id, item.path)
        cells.append(
            Cell(
                f"V{n:04d}",
                item.path,
                item.start_line,
                item.end_line,
                VERIFY_LENS,
                CellState.PENDING,
                0,
                None,
                None,
                None,
                row.sha256 if row is not None else "",
                CellKind.VERIFY.value,
                item.subject,
            )
        )
    tx.insert_cells(audit_id, cells, now)
    findings = sum(1 for d in due if d.what == "finding")
    tx.log(
        now=now,
        audit_id=audit_id,
        actor="engine",
        action="plan_verification",
        detail=f"{len(cells)} verify cell(s): {findings} finding(s) at or above {config.verify_severity}, "
        f"{len(cells) - findings} doubtful duplicate pair(s)",
        outcome="ok",
    )
    return len(cells)


def brief(f: Finding) -> dict[str, Any]:
    """What a verifier is told of a finding: the reported facts, never the reporter's confidence."""
    return {
        "title": f.title,
        "severity": f.severity,
        "category": f.category,
        "category_id": f.category_id,
        "file": f.file,
        "start_line": f.start_line,
        "end_line": f.end_line,
        "symbol": f.symbol,
        "evidence": f.evidence,
        "description": f.description,
        "recommendation": f.recommendation,
        "lenses": list(f.lenses),
        "related_locations": list(f.related_locations),
        "evidence_ranges": [{"start_line": a, "end_line": b} for a, b in f.locations],
    }


def verify_tasks(synthesis: Synthesis, cells: Sequence[Cell]) -> tuple[list[VerifyTask], list[Cell]]:
    """The tasks of these verify cells, and the cells whose subject no longer exists (withdrawn findings)."""
    # The prompts' own record, loaded by those that write or check a verifier's packet: status, which only
    # counts what is due, loads no prompt writer.
    from audit_mcp.engine.opinion_prompts import VerifyTask

    by_alias = {alias: f for f in synthesis.findings for alias in f.aliases}
    doubts = {d.subject: d for d in synthesis.doubtful}
    tasks, stale = [], []
    for cell in cells:
        subject = cell.subject or ""
        if subject.startswith("finding:") and (f := by_alias.get(subject.split(":", 1)[1])) is not None:
            tasks.append(VerifyTask(cell, (brief(f),)))
            continue
        if subject.startswith("pair:"):
            _, a, b = subject.split(":", 2)
            first, second = by_alias.get(a), by_alias.get(b)
            doubt = doubts.get(subject)
            if first is not None and second is not None and first is not second:
                why = doubt.why if doubt is not None else "they are close in one file"
                tasks.append(VerifyTask(cell, (brief(first), brief(second)), why))
                continue
        stale.append(cell)
    return tasks, stale


def claimed(synthesis: Synthesis, cells: Sequence[Cell]) -> dict[str, str]:
    """Each verify task's reported severity (``PAIR`` for a pair), as its verifier was shown it."""
    from audit_mcp.engine.opinion_prompts import PAIR

    tasks, _stale = verify_tasks(synthesis, cells)
    return {t.cell.task_id: PAIR if t.is_pair else str(t.findings[0]["severity"]) for t in tasks}


def carry_forward(tx: Tx, audit_id: int, sources: list[int], now: str) -> int:
    """Keep the second opinions earlier audits gave on findings that came along unchanged (their file's content
    is the same, and every finding the subject names is in this audit): their cells and verdicts are copied,
    from ``sources``, the earlier audits newest first. Returns how many."""
    if not sources:
        return 0
    findings = {alias for f in current_synthesis(tx, audit_id).findings for alias in f.aliases}
    hashes = {f.path: f.sha256 for f in tx.files(audit_id)}
    taken: set[str] = set()
    count = 0
    for previous in sources:
        verdicts = {row.task_id: row for row in tx.finding_verdicts(previous)}
        kept = []
        for cell in tx.cells(previous, DONE_STATES, kinds=[CellKind.VERIFY]):
            fingerprints = (cell.subject or "").split(":")[1:]
            if (
                cell.task_id in taken
                or not fingerprints
                or hashes.get(cell.path) != cell.content_hash
                or not set(fingerprints) <= findings
            ):
                continue
            taken.add(cell.task_id)
            kept.append(
                Cell(
                    cell.task_id,
                    cell.path,
                    cell.start_line,
                    cell.end_line,
                    cell.lens,
                    CellState.CARRIED,
                    0,
                    cell.run_id,
                    cell.packet_id,
                    cell.reason
                    if cell.state == CellState.CARRIED and cell.reason
                    else f"carried forward from audit {previous}: content unchanged",
                    cell.content_hash,
                    cell.kind,
                    cell.subject,
                )
            )
        tx.insert_cells(audit_id, kept, now)
        for cell in kept:
            if (row := verdicts.get(cell.task_id)) is not None:
                tx.insert_finding_verdict(
                    audit_id, task_id=row.task_id, subject=row.subject, packet_id=row.packet_id, payload=row.answer
                )
        count += len(kept)
    return count
