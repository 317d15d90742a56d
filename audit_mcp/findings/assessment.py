"""Assessment: the second opinions applied to a synthesis, for the report, SARIF and status.

Pure: a synthesis, the verifiers' verdicts and the runtime evidence in; a synthesis out whose findings
carry a status (``unverified``, ``confirmed``, ``likely``, ``overstated``, ``disputed``, ``reproduced``,
``not_reproduced``) and whose false positives moved to ``refuted`` with their counter-evidence, never
dropped. An overstated finding takes the verifier's fair severity and keeps the reported one
(``original_severity``); verifiers who disagree leave it ``disputed`` at its reported severity. Evidence
from running the code outranks a reading: reproduced, a finding stays (or comes back from ``refuted``).
Findings keep their ids; their order, and the work blocks, follow the assessed severity and status.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit_mcp.findings.blocks import rank, work_blocks
from audit_mcp.findings.model import SEVERITY_RANK, Finding, Synthesis
from audit_mcp.store.records import RuntimeEvidence, VerdictRow

REFUTED = "refuted"  # the status of a finding a verifier found false (verdict false_positive)


def _verdict_doc(row: VerdictRow) -> dict[str, Any]:
    doc = {"task_id": row.task_id, "packet_id": row.packet_id}
    for key in ("verdict", "fair_severity", "rationale", "summary", "cited"):
        if key in row.answer:
            doc[key] = row.answer[key]
    return doc


def _evidence_doc(row: RuntimeEvidence) -> dict[str, Any]:
    return {"evidence_id": row.evidence_id, "verdict": row.verdict, "added_at": row.added_at, **row.payload}


def _settle(f: Finding) -> str:
    """The finding's status from its verdicts and runtime evidence; sets its assessed severity."""
    kinds = {v["verdict"] for v in f.verdicts}
    if len(kinds) > 1:
        status = "disputed"
    elif kinds:
        status = kinds.pop()
        status = REFUTED if status == "false_positive" else status
    else:
        status = "unverified"
    if status == "overstated":
        fair = min((v["fair_severity"] for v in f.verdicts), key=SEVERITY_RANK.__getitem__)
        f.original_severity, f.severity = f.severity, fair
    runtime = {e["verdict"] for e in f.runtime_evidence}
    if "reproduced" in runtime:
        return "reproduced"
    if "not_reproduced" in runtime:
        return "not_reproduced"
    return status


def assess(synthesis: Synthesis, verdicts: Sequence[VerdictRow], evidence: Sequence[RuntimeEvidence]) -> Synthesis:
    """The synthesis with every verdict and piece of runtime evidence applied (``synthesis`` is consumed)."""
    by_alias = {alias: f for f in synthesis.findings for alias in f.aliases}
    judged_distinct: set[frozenset[str]] = set()
    for row in verdicts:
        kind, _, rest = row.subject.partition(":")
        if kind == "finding" and (f := by_alias.get(rest)) is not None and row.answer.get("verdict"):
            f.verdicts.append(_verdict_doc(row))
        elif kind == "pair" and row.answer.get("same_defect") is False:
            judged_distinct.add(frozenset(rest.split(":", 1)))
        elif kind == "pair" and row.answer.get("same_defect") is True:
            first, _, second = rest.partition(":")
            if (f := by_alias.get(first)) is not None and second in f.aliases:
                f.merged_pairs.append(_verdict_doc(row) | {"same_defect": True})
    for item in evidence:
        if (f := by_alias.get(item.fingerprint)) is not None:
            f.runtime_evidence.append(_evidence_doc(item))
    kept: list[Finding] = []
    refuted: list[Finding] = []
    for f in synthesis.findings:
        f.status = _settle(f)
        (refuted if f.status == REFUTED else kept).append(f)
    for doubt in synthesis.doubtful:
        pairs = {frozenset((a, b)) for a in doubt.first.aliases for b in doubt.second.aliases}
        if pairs & judged_distinct:
            doubt.judged = "distinct"
    kept.sort(key=rank)
    refuted.sort(key=lambda f: (f.file, f.start_line))
    return Synthesis(kept, work_blocks(kept), synthesis.doubtful, refuted)


def verification_counts(s: Synthesis) -> dict[str, int]:
    """Findings by status, refuted ones included."""
    counts: dict[str, int] = {}
    for f in [*s.findings, *s.refuted]:
        counts[f.status] = counts.get(f.status, 0) + 1
    return counts
